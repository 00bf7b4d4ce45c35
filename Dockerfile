# The pinned ddpbench agent image: bench/agent (with bench/common, the suites and the models) on the torch + NCCL of a hashed lock file.
# `make image` builds it, `make image-lock` pins the base by digest; docs/image.md.
ARG BASE_IMAGE=nvidia/cuda:13.0.1-runtime-ubuntu24.04

# The base plus a Python that can make a venv. The CUDA images ship none; a base that already
# has one (the tests' debootstrapped Debian) needs no package index.
FROM ${BASE_IMAGE} AS python
# The Python of the base's own release, whatever version the archive serves today: the image is
# pinned by its digest once built, not by rebuilding.
# hadolint ignore=DL3008
RUN if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then \
      apt-get update \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \
      && rm -rf /var/lib/apt/lists/*; \
    fi

# Dependencies from a lock file with hashes; the lock stays in the image as the record of them.
FROM python AS deps
# docker/requirements/LOCK.lock: cuda (default), cuda-sdxl (adds diffusers), cpu (tests).
ARG LOCK=cuda
# Where pip finds the locked wheels when PyPI is out of reach: a mirror or a served wheelhouse.
ARG PIP_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_NO_INDEX
COPY docker/requirements/${LOCK}.lock /etc/ddpbench/requirements.lock
# The agent lives in its own layer (below); this .pth puts it on the venv's path.
RUN python3 -m venv /opt/ddpbench \
    && /opt/ddpbench/bin/pip install --no-cache-dir --disable-pip-version-check --require-hashes --no-deps \
       -r /etc/ddpbench/requirements.lock \
    && /opt/ddpbench/bin/pip check \
    && /opt/ddpbench/bin/python -c 'import pathlib, sysconfig; \
pathlib.Path(sysconfig.get_path("purelib"), "ddpbench-agent.pth").write_text("/opt/ddpbench-agent\n")'

# The pin: what this image was built from, read by the agent's fingerprint.
FROM deps AS pin
ARG BASE_IMAGE
ARG IMAGE=ddpbench
ARG GIT_COMMIT=unknown
COPY docker/write_pin.py /tmp/write_pin.py
RUN /opt/ddpbench/bin/python /tmp/write_pin.py --out /tmp/pin.json \
      --image "${IMAGE}" --base-image "${BASE_IMAGE}" --git-commit "${GIT_COMMIT}"

# The venv stays in the layers it was installed in: copying it to a fresh stage would write its
# gigabytes once more for nothing the final image lacks.
FROM deps
ARG BASE_IMAGE
ARG GIT_COMMIT=unknown
LABEL org.opencontainers.image.title="ddpbench agent" \
      org.opencontainers.image.revision="${GIT_COMMIT}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
COPY --from=pin /tmp/pin.json /etc/ddpbench/pin.json
# Only the agent, as its zipapp holds it (bench/controller/agent_package.py): the image needs nothing
# of the controller, and .dockerignore keeps the suites' report parts out.
COPY bench/__init__.py bench/errors.py /opt/ddpbench-agent/bench/
COPY bench/agent /opt/ddpbench-agent/bench/agent
COPY bench/common /opt/ddpbench-agent/bench/common
COPY bench/judging /opt/ddpbench-agent/bench/judging
COPY bench/suites /opt/ddpbench-agent/bench/suites
COPY bench/models /opt/ddpbench-agent/bench/models
ENV PATH=/opt/ddpbench/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /tmp
CMD ["python", "-m", "bench.agent", "fingerprint"]
