"""Synthetic engine package: see bench/synth_engine/synth_openai.py."""
