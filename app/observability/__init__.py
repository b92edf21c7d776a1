"""What the process reports about itself to operators: its runs' traces (OpenTelemetry), the
format of its log lines and the ids they carry, its event loop's lag."""
