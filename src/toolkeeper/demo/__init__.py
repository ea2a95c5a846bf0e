"""The guided demo: native demo tools, their config and the scripted agent that drives them
through every gate (``toolkeeper demo``)."""
