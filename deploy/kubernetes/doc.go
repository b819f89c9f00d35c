// Package kubernetes holds no code: this directory holds leaf's Kubernetes
// manifests (base/, and the variants deployment/ and statefulset/, each a
// kustomize directory; README.md says how to use them), and this package's
// tests keep them right. Every manifest decodes strictly into the Kubernetes
// API types, the variants have the probes, budget, Service and resources
// they claim, and the configuration each variant's container gives leaf (the
// ConfigMap's file, the image's and the container's environment, its args,
// the Secret's token file) passes 'leaf serve --check', so a manifest cannot
// carry a setting leaf would refuse.
package kubernetes
