"""API keys: the KeyStore seam (base.py), kept by each store's keys.py (shared/store/sqlite/, .../mongo/), and the
key format."""
