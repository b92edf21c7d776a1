"""Chaos tests: real `omniforge serve` processes on a private Postgres (and Redis) that a test
stops, kills and restarts while tasks run, and the invariants no fault may break: no task run
twice, no paid LLM call repeated, no event lost, no task failed.

The harness: `llm` (a counting fake LLM), `fleet` (the instances and their private servers;
`namespaces` for an instance in a PID namespace of its own), `submit` (a retrying submission
client; `retries` says how long it waits), `followers` (streams followed through reconnects),
`waiting` (waits on what they observe, without polling), `ledger` (what the database stored)
and `invariants` (the checks, one message per broken one)."""
