"""Docker on the controller side: the docker command line as an API (`engine`), where it runs
(`shell`), and the pinned agent image (`image`). Never imported by the agent."""
