# leaf: a static binary on a distroless base, running as a non-root user.
#
#   docker build --build-arg VERSION=v1.0.0 -t leaf .
#
# Without VERSION, the binary reports 'git describe --tags --always --dirty'
# of the build context, or "dev" when the context has no git history.
#
# As it is, the image refuses to start (exit 2): it listens on every
# interface, and its defaults keep IDs in this container alone (segments in an
# embedded SQLite file, snowflake as local worker 0), so that two containers
# would issue the same IDs. Tell it which case you are in (and give it an
# admin token, see below):
#
#   One container, and only one: say so.
#     docker run -p 8080:8080 -v leaf-data:/var/lib/leaf \
#       -e LEAF_SINGLE_NODE=true -e LEAF_ADMIN_TOKEN=... leaf
#
#   Several: share the segment store and the worker-ID registry.
#     docker run -p 8080:8080 -v leaf-data:/var/lib/leaf -e LEAF_ADMIN_TOKEN=... \
#       -e LEAF_SEGMENT_STORE=mysql -e LEAF_SEGMENT_DSN='user:pw@tcp(db:3306)/leaf' \
#       -e LEAF_SNOWFLAKE_REGISTRY=zookeeper -e LEAF_SNOWFLAKE_ZK=zk:2181 leaf
#     (postgres for the store; etcd or mysql for the registry; or a worker ID
#     of its own per container, LEAF_SNOWFLAKE_WORKER_ID.)
#
# Configure with LEAF_* variables or a mounted YAML file (LEAF_CONFIG), as
# etc/leaf.yml documents; Java Leaf's leaf.properties works with
# --leaf-properties. See docs/one-node-or-many.md.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=
# The same script as the tests' TestStaticBinary: CGO_ENABLED=0, -trimpath.
RUN scripts/build-static.sh /out/leaf "$VERSION" && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/leaf /usr/local/bin/leaf
# The data directory (embedded SQLite store, snowflake cache and lock files)
# belongs to the non-root user; mount a volume there to keep it.
COPY --from=build --chown=nonroot:nonroot /out/data /var/lib/leaf
# Listening on every interface, leaf serve refuses to start without an admin
# token: docker run -e LEAF_ADMIN_TOKEN=... (or LEAF_ADMIN_TOKEN_FILE with a
# mounted secret; see docs/operating.md, "Security"), and on the node-local defaults
# without LEAF_SINGLE_NODE=true (see the top of this file). Neither is set
# here: both are the operator's decision.
ENV LEAF_LISTEN=0.0.0.0:8080 \
    LEAF_DATA_DIR=/var/lib/leaf \
    LEAF_LOG_FORMAT=json
WORKDIR /var/lib/leaf
USER nonroot:nonroot
EXPOSE 8080
# SIGTERM starts the graceful shutdown (drain, give unused IDs back); give it
# shutdown_timeout (10s) with docker stop -t 15.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/leaf"]
CMD ["serve"]
