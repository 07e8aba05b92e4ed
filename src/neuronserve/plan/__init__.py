"""The plan: PURE functions from settings and host facts to a LaunchPlan (second step of the flow).

Nothing here reads the machine, the files or the network: `neuronserve.host` gathers the facts
(`plan.facts` holds their shapes), and one wiring module outside the plan hands settings and facts
to `plan.build.build_plan`. A test walks this package's syntax tree to keep it so. The layout by
concern is docs/DESIGN.md's.
"""
