"""Docker on the controller side: the docker command line as an API (`engine`, run through a
bench.controller.shell Shell), the pinned agent image (`image`) and compose topologies
(`compose`). Never imported by the agent."""
