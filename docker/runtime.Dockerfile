# The ringtorch runtime image of the compose cluster: Debian 12, the runtime packages the host's
# build links against, and that build installed under /usr/local. Built by
# scripts/compose_cluster.sh from a staging directory it prepares (scripts/compose/runtime_image.sh);
# why the host's build is installed instead of compiling inside the image: docs/cluster.md.
#   STAGE/usr/local/...       cmake --install of the host's build (+ the CUDA runtime it links)
#   STAGE/node_entrypoint.sh  docker/node_entrypoint.sh
#   STAGE/link_shaping.sh     scripts/link_shaping.sh
ARG BASE_IMAGE=debian:12
FROM ${BASE_IMAGE}
# Space-separated Debian packages: what the binaries need (found from their NEEDED entries),
# OpenBLAS, redis-server (the cluster's store runs from this image too) and iproute2 (tc).
# Its own layer, so a new build of ringtorch reuses it.
ARG PACKAGES
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${PACKAGES} >/dev/null \
 && rm -rf /var/lib/apt/lists/*
COPY link_shaping.sh /usr/local/share/ringtorch/link_shaping.sh
COPY node_entrypoint.sh /usr/local/bin/ringtorch-node
COPY usr/local/ /usr/local/
RUN ldconfig
ENTRYPOINT ["ringtorch-node"]
CMD ["ringrun", "--help"]
