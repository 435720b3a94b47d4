"""How lineage is shown: graphs laid out and drawn, and the reports built on them (the
console and the `tfxp` commands both show them; the queries are metadata/'s)."""
