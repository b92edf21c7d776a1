"""The files resource of the API."""
