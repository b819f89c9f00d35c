// Package kubernetes keeps leaf's Kubernetes manifests right. The manifests
// live in the leaf module's deploy/kubernetes (base/, and the variants
// deployment/ and statefulset/, each a kustomize directory; its README.md
// says how to use them); these tests run there. Every manifest decodes
// strictly into the Kubernetes API types, the variants have the probes,
// budget, Service and resources they claim, and the configuration each
// variant's container gives leaf (the ConfigMap's file, the image's and the
// container's environment, its args, the Secret's token file) passes 'leaf
// serve --check', so a manifest cannot carry a setting leaf would refuse.
package kubernetes
