"""The secrets resource of the API."""
