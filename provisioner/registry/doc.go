// Package registry implements the registry+v1 (OLM bundle) format: it
// validates a bundle and converts it into plain+v0 content that the shared
// BundleDeployment reconciler installs.
//
// The converted filesystem holds the objects to install under manifests/, one
// object per file, and a copy of the original bundle under registry+v1/ so an
// installer can re-render it with a BundleDeployment's spec.config without
// unpacking again:
//
//	fsys, err := registry.Convert(bundleFS, registry.Options{})
//	...
//	if registry.IsRegistryContent(stored) {
//		sub, _ := fs.Sub(stored, registry.SourceDir)
//		fsys, err = registry.Convert(sub, opts)
//	}
//
// Install modes are chosen with the BundleDeployment's spec.config:
//
//	spec:
//	  config:
//	    installNamespace: my-operator   # default: CSV annotation operatorframework.io/suggested-namespace, else <package>-system
//	    watchNamespaces: [team-a]       # default: see below
//	    certificateProvider: cert-manager # webhooks' certificates; default: rukpak (the provisioner)
//
// watchNamespaces equal to [installNamespace] selects OwnNamespace, one other
// namespace SingleNamespace, several MultiNamespace, and [""] (OLM's explicit
// spelling of all namespaces) AllNamespaces.
//
// Without watchNamespaces (absent or empty) the install mode is AllNamespaces
// when the CSV supports it, else OwnNamespace (watching only the install
// namespace, with olm.targetNamespaces set to it and the CSV's permissions
// granted by Roles and RoleBindings there) when the CSV supports that. A CSV
// that supports neither has no default: conversion fails naming the supported
// install modes, and watchNamespaces must be set. Because a Bundle is
// converted with default options when it is unpacked, this default is what
// lets a bundle without AllNamespaces, such as one supporting only
// OwnNamespace and SingleNamespace, unpack at all.
package registry
