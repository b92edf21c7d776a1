"""The remote_agents resource of the API."""
