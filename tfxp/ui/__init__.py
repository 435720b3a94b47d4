"""The console (`tfxp ui`): a read-only web app over ML Metadata; see app.py."""
