"""A2A (v1.0) on the tool side: remote A2A agents called as tools, and the extension both
our A2A server and our client speak (usage and cost of a task's whole family, resumable
subscriptions)."""
