"""The schedules resource of the API."""
