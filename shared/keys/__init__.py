"""API keys: the KeyStore seam (base.py) with MongoDB and SQLite implementations, and the key format."""
