"""Synthetic example transcripts for ``loopfuse demo`` (package data, written for loopfuse).

- ``looping_agent.json``: a trajectory (OpenAI Chat) where an agent re-runs the same
  failing test command and gets the same failure each time;
- ``ab_cycle.json``: an Anthropic Messages request body where the agent alternates the
  same edit and the same test run, A -> B -> A -> B, with the same answers each lap;
- ``retry_storm.jsonl``: a proxy log where a client re-sends one identical request
  after each timeout, beside a healthy session;
- ``healthy_run.json``: a trajectory that makes progress (a build polled while its
  output moves) and must come out clean.

None of them is a recorded run; they are small on purpose.
"""
