"""The serve lifecycle: stage -> engines -> front -> publish, under one supervisor.

`neuronserve.front` is HTTP only; this package runs it (uvicorn), owns the process's signals and
wires the stager, the replica pool and the app together."""
