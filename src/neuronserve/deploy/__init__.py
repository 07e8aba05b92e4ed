"""Deployment helpers behind the scripts in sagemaker/: pure request builders plus thin AWS calls.

Kept out of the serving path: nothing here is imported by `neuronserve serve`, and the AWS SDKs are
imported inside functions so the package stays importable without the `deploy` extra.
"""
