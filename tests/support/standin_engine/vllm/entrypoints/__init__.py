"""Stand-in package: see api_server.py."""
