"""The plan: PURE functions from settings and host facts to a LaunchPlan (second step of the flow).

No I/O happens here except in `hostfacts` (which gathers the facts) and `resolve` (which wires
settings, facts and the plan together for the commands).
"""
