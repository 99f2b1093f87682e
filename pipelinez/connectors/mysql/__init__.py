"""The mysql connector (MySQL and MariaDB). The class lives in `connector.py`; importing this package is
cheap (no driver is imported until a connector method runs)."""
