"""What every component here is built on: the one way to write a component, artifacts' custom properties, where Beam work may run."""
