"""The call pipeline: one module per step, in SPEC §2 order, plus the state they share."""
