"""The controller: runs on the user's workstation, loads hosts and plans, drives the agents,
merges their results into one bundle. Never imports torch."""
