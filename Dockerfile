# For people with Docker (or Podman/Buildah). Without one, `make image`
# builds the equivalent image in Go (hack/image): same files, same user.
#
#   docker build -t rukpak:devel .
#   kind load docker-image rukpak:devel --name rukpak-e2e
#
# The manifests set `command` (/provisioner or /webhook), so the image has
# no entrypoint.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -o /out/ ./cmd/provisioner ./cmd/webhook

FROM gcr.io/distroless/static:nonroot
ARG VERSION=devel
ARG REVISION=unknown
LABEL org.opencontainers.image.title="rukpak" \
      org.opencontainers.image.source="https://github.com/rukpak-dev/rukpak" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"
COPY --from=build /out/provisioner /provisioner
COPY --from=build /out/webhook /webhook
USER 65532:65532
