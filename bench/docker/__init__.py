"""Docker on the controller side: the pinned agent image (`image`) and compose topologies
(`compose`), through the docker command line's API (bench/controller/docker_engine.py). Never
imported by the agent."""
