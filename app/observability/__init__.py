"""What the process reports about itself to operators, besides its runs."""
