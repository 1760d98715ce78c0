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
//	    watchNamespaces: [team-a]       # default: all namespaces, when the CSV supports AllNamespaces
//
// watchNamespaces equal to [installNamespace] selects OwnNamespace, one other
// namespace SingleNamespace, several MultiNamespace.
package registry
