"""The plan: PURE functions from settings and host facts to a LaunchPlan (second step of the flow).

Nothing here reads the machine, the files or the network: `neuronserve.host` gathers the facts
(`plan.facts` holds their shapes) and `host.resolve` wires settings, facts and the plan together.
A test walks this package's syntax tree to keep it so.
"""
