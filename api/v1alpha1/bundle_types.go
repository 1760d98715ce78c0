package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SourceType names the kind of location a Bundle's content comes from.
// +kubebuilder:validation:Enum=image;git;configMaps;http;upload;catalog
type SourceType string

const (
	SourceTypeImage      SourceType = "image"
	SourceTypeGit        SourceType = "git"
	SourceTypeConfigMaps SourceType = "configMaps"
	SourceTypeHTTP       SourceType = "http"
	SourceTypeUpload     SourceType = "upload"
	// SourceTypeCatalog is for BundleDeployment templates only: the
	// provisioner resolves it to an image from the cluster's Catalogs and
	// generates the Bundle from that image. Bundles and Catalogs refuse it.
	SourceTypeCatalog SourceType = "catalog"
)

// BundleSpec defines the desired state of a Bundle. It is immutable once the
// Bundle is created.
type BundleSpec struct {
	// provisionerClassName names the provisioner that unpacks this Bundle,
	// for example core-rukpak-io-plain or core-rukpak-io-registry.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	// +required
	ProvisionerClassName string `json:"provisionerClassName"`

	// source is where the Bundle's content comes from.
	// +required
	Source BundleSource `json:"source"`
}

// BundleSource is the location of a Bundle's content. Exactly one member,
// the one named by type, is set. The CRD requires exactly one member with
// the API server's oneOf (hack/crdpatch adds it: controller-gen cannot),
// and these rules that it is the one type names, in the words of RukPak's
// webhook.
// +kubebuilder:validation:XValidation:rule="self.type != 'image' || has(self.image)",message="bundle.spec.source.image must be set for source type \"image\""
// +kubebuilder:validation:XValidation:rule="self.type != 'git' || has(self.git)",message="bundle.spec.source.git must be set for source type \"git\""
// +kubebuilder:validation:XValidation:rule="self.type != 'configMaps' || has(self.configMaps)",message="bundle.spec.source.configmaps must be set for source type \"configmaps\""
// +kubebuilder:validation:XValidation:rule="self.type != 'http' || has(self.http)",message="bundle.spec.source.http must be set for source type \"http\""
// +kubebuilder:validation:XValidation:rule="self.type != 'upload' || has(self.upload)",message="bundle.spec.source.upload must be set for source type \"upload\""
// +kubebuilder:validation:XValidation:rule="self.type != 'catalog' || has(self.catalog)",message="bundle.spec.source.catalog must be set for source type \"catalog\""
type BundleSource struct {
	// type is the kind of source: image, git, configMaps, http or upload;
	// catalog in a BundleDeployment's template only.
	// +required
	Type SourceType `json:"type"`
	// image is an OCI image that holds the bundle in its filesystem.
	// +optional
	Image *ImageSource `json:"image,omitempty"`
	// git is a git repository that holds the bundle in a directory.
	// +optional
	Git *GitSource `json:"git,omitempty"`
	// configMaps are ConfigMaps, in the provisioner's namespace, whose files
	// make up the bundle.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	ConfigMaps []ConfigMapSource `json:"configMaps,omitempty"`
	// http is a tar.gz archive of the bundle served over HTTP(S).
	// +optional
	HTTP *HTTPSource `json:"http,omitempty"`
	// upload is content uploaded to the provisioner's content service
	// (PUT /uploads/<bundle name>.tgz, as rukpakctl run does) by a user
	// allowed to create bundles/upload for this Bundle. Write it as
	// "upload: {}", or pin the content with a digest.
	// +optional
	Upload *UploadSource `json:"upload,omitempty"`
	// catalog picks a bundle of a package from the cluster's Catalogs
	// (BundleDeployment templates only): the provisioner resolves it to the
	// bundle's image and generates the Bundle with an image source.
	// +optional
	Catalog *CatalogSource `json:"catalog,omitempty"`
}

// UpgradeConstraintPolicy says which bundles may follow the installed one.
// +kubebuilder:validation:Enum=CatalogProvided;SelfCertified
type UpgradeConstraintPolicy string

// Upgrade constraint policies.
const (
	// UpgradeConstraintPolicyCatalogProvided follows the catalog's upgrade
	// edges (replaces, skips, skipRange) from the installed bundle.
	UpgradeConstraintPolicyCatalogProvided UpgradeConstraintPolicy = "CatalogProvided"
	// UpgradeConstraintPolicySelfCertified allows any version in range,
	// downgrades included.
	UpgradeConstraintPolicySelfCertified UpgradeConstraintPolicy = "SelfCertified"
)

// CatalogSource selects a bundle of a package from the cluster's Catalogs,
// as OLM v1's ClusterExtension does.
type CatalogSource struct {
	// packageName is the package to install.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	PackageName string `json:"packageName"`
	// channels restricts the bundles to those in these channels; unset:
	// every channel, and bundles in none.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	Channels []string `json:"channels,omitempty"`
	// version is a semver range the bundle's version must satisfy, written
	// as OLM v1 users write it: ">=1.2.0 <2", "~1.2", "^1", "1.2.x",
	// comparisons joined by "," (and) or "||" (or). Unset: any version.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`
	// selector picks the Catalogs by label; unset: every Catalog. Only
	// Catalogs that are Serving take part, ordered by their spec.priority.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// upgradeConstraintPolicy is CatalogProvided (the default: upgrades
	// follow the catalog's replaces, skips and skipRange edges from the
	// installed bundle) or SelfCertified (any version in range, downgrades
	// included).
	// +optional
	UpgradeConstraintPolicy UpgradeConstraintPolicy `json:"upgradeConstraintPolicy,omitempty"`
	// certificateData is a PEM bundle of extra CA certificates trusted for
	// the registry of the resolved bundle image, as an image source's. The
	// catalog names the image; the BundleDeployment decides what to trust
	// (and a catalog never chooses credentials).
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CertificateData string `json:"certificateData,omitempty"`
	// insecureSkipTLSVerify turns off verification of the resolved image's
	// registry certificate. Use only for testing.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
}

// UploadSource is a tar.gz archive uploaded for the Bundle.
type UploadSource struct {
	// digest is the sha256 ("sha256:<hex>") of the uploaded tar.gz archive.
	// Set in a spec, it pins what may be uploaded: an archive with another
	// digest is refused (409). The provisioner records the uploaded
	// archive's digest in status.resolvedSource.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	Digest string `json:"digest,omitempty"`
}

// ImageSource is a bundle image.
type ImageSource struct {
	// ref is the image reference, by tag or (preferably, for an immutable
	// Bundle) by digest, e.g. quay.io/org/bundle@sha256:....
	// +kubebuilder:validation:MinLength=1
	// +required
	Ref string `json:"ref"`
	// pullSecret names a kubernetes.io/dockerconfigjson Secret in the
	// provisioner's namespace used to pull the image.
	// +optional
	ImagePullSecretName string `json:"pullSecret,omitempty"`
	// insecureSkipTLSVerify turns off verification of the registry's
	// certificate. Use only for testing.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
	// certificateData is a PEM bundle of extra CA certificates trusted for
	// the registry, added to the system roots.
	// +optional
	CertificateData string `json:"certificateData,omitempty"`
}

// GitSource is a bundle stored in a git repository.
type GitSource struct {
	// repository is the URL of the repository (https://, http://, ssh:// or
	// user@host:path).
	// +kubebuilder:validation:MinLength=1
	// +required
	Repository string `json:"repository"`
	// directory is the bundle's directory inside the repository, relative to
	// its root; it defaults to the root. It may not leave the repository.
	// +optional
	Directory string `json:"directory,omitempty"`
	// ref is the branch, tag or commit to check out; exactly one of them is
	// set.
	// +required
	Ref GitRef `json:"ref"`
	// auth configures authentication to the repository.
	// +optional
	Auth *Authorization `json:"auth,omitempty"`
}

// GitRef names exactly one of a branch, a tag or a commit (the CRD's oneOf,
// added by hack/crdpatch).
type GitRef struct {
	// branch is a branch name; the Bundle unpacks the branch's head at the
	// time of the first unpack and keeps that commit afterwards.
	// +optional
	// +kubebuilder:validation:MinLength=1
	Branch string `json:"branch,omitempty"`
	// tag is a tag name; the commit it points to at the first unpack is kept.
	// +optional
	// +kubebuilder:validation:MinLength=1
	Tag string `json:"tag,omitempty"`
	// commit is a full or abbreviated commit hash.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{4,64}$`
	Commit string `json:"commit,omitempty"`
}

// Authorization configures access to a git repository or an HTTP source.
type Authorization struct {
	// secret names a Secret in the provisioner's namespace. For https it
	// holds username and password; for ssh, ssh-privatekey and
	// ssh-knownhosts.
	// +optional
	Secret *LocalObjectReference `json:"secret,omitempty"`
	// insecureSkipVerify turns off verification of the server's TLS
	// certificate or SSH host key. Use only for testing.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// SecretName is the name of the referenced Secret, or "" (also on nil).
func (a *Authorization) SecretName() string {
	if a == nil || a.Secret == nil {
		return ""
	}
	return a.Secret.Name
}

// SkipVerify reports insecureSkipVerify (false on nil).
func (a *Authorization) SkipVerify() bool {
	return a != nil && a.InsecureSkipVerify
}

// LocalObjectReference names an object in the provisioner's namespace.
type LocalObjectReference struct {
	// name of the object.
	// +optional
	Name string `json:"name,omitempty"`
}

// ConfigMapSource places the files of one ConfigMap at a path of the bundle.
type ConfigMapSource struct {
	// configMap names the ConfigMap, in the provisioner's namespace. Each key
	// becomes a file.
	// +required
	ConfigMap LocalObjectReference `json:"configMap"`
	// path is the directory, relative to the bundle root, the files are
	// placed in; it defaults to the root. It may not leave the bundle.
	// +optional
	Path string `json:"path,omitempty"`
	// digest identifies the ConfigMap's content: "sha256:<hex>" of its files
	// in key order, each written as the key, a NUL byte, the size in
	// decimal, a NUL byte and the content. The provisioner records it in
	// status.resolvedSource and refuses to unpack the Bundle again from
	// different content (a ConfigMap deleted and re-created under the same
	// name). Set in a spec, it pins the content the same way.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	Digest string `json:"digest,omitempty"`
}

// HTTPSource is a tar.gz archive of the bundle.
type HTTPSource struct {
	// url of the archive.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^https?://`
	// +required
	URL string `json:"url"`
	// auth configures basic authentication (username and password keys of
	// the Secret) and TLS verification.
	// +optional
	Auth *Authorization `json:"auth,omitempty"`
}

// BundleStatus is the observed state of a Bundle.
type BundleStatus struct {
	// phase is a one-word summary: Pending, Unpacking, Failing or Unpacked.
	// +optional
	Phase string `json:"phase,omitempty"`
	// resolvedSource is the source pinned to what was unpacked: an image by
	// digest or a git commit. Re-unpacks use it, so content never changes.
	// +optional
	ResolvedSource *BundleSource `json:"resolvedSource,omitempty"`
	// contentURL is where authorised clients download the unpacked content as
	// a tar.gz.
	// +optional
	ContentURL string `json:"contentURL,omitempty"`
	// contentDigest is the SHA-256 digest ("sha256:<hex>") of the stored
	// tar.gz content. Stored archives are deterministic, so every replica
	// serves these bytes; a provisioner downloading the content refuses any
	// other.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	ContentDigest string `json:"contentDigest,omitempty"`
	// observedGeneration is the generation last processed.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Unpacked.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Bundle is a piece of content to be unpacked by a provisioner. Its spec is
// immutable. Its name is at most 52 characters (the CRD's maxLength, added
// by hack/crdpatch).
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.source.type`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Provisioner",type=string,JSONPath=`.spec.provisionerClassName`,priority=1
// +kubebuilder:printcolumn:name="Resolved Source",type=string,JSONPath=`.status.resolvedSource`,priority=1
// +kubebuilder:validation:XValidation:rule="self.spec.source.type != 'catalog'",message="bundle.spec.source.type \"catalog\" is for bundle deployment templates only: a Bundle's source names its content"
type Bundle struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec BundleSpec `json:"spec"`
	// +optional
	Status BundleStatus `json:"status,omitempty"`
}

// BundleList is a list of Bundles.
// +kubebuilder:object:root=true
type BundleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Bundle `json:"items"`
}
