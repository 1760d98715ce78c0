package v1alpha1

// Provisioner class names shipped with this project.
const (
	// ProvisionerClassPlain handles plain+v0 bundles.
	ProvisionerClassPlain = "core-rukpak-io-plain"
	// ProvisionerClassRegistry handles registry+v1 bundles, converting them to
	// plain+v0 content at unpack time.
	ProvisionerClassRegistry = "core-rukpak-io-registry"
)

// Labels stamped on generated Bundles and on every installed object.
const (
	LabelOwnerKind          = "core.rukpak.io/owner-kind"
	LabelOwnerName          = "core.rukpak.io/owner-name"
	LabelBundleTemplateHash = "core.rukpak.io/bundle-template-hash"
)

// FinalizerDeleteCachedBundle guards a Bundle until its stored content has
// been removed.
const FinalizerDeleteCachedBundle = "core.rukpak.io/delete-cached-bundle"

// FinalizerUninstall guards a BundleDeployment until its release has been
// uninstalled and its generated Bundles removed.
const FinalizerUninstall = "core.rukpak.io/uninstall"

// Condition types.
const (
	TypeUnpacked       = "Unpacked"
	TypeHasValidBundle = "HasValidBundle"
	TypeInstalled      = "Installed"
	TypeHealthy        = "Healthy"
)

// Condition reasons.
const (
	ReasonUnpackPending         = "UnpackPending"
	ReasonUnpacking             = "Unpacking"
	ReasonUnpackSuccessful      = "UnpackSuccessful"
	ReasonUnpackFailed          = "UnpackFailed"
	ReasonBundleLoadFailed      = "BundleLoadFailed"
	ReasonInstallationSucceeded = "InstallationSucceeded"
	ReasonInstallFailed         = "InstallFailed"
	ReasonUpgradeFailed         = "UpgradeFailed"
	ReasonReconcileFailed       = "ReconcileFailed"
	ReasonHealthy               = "Healthy"
	ReasonUnhealthy             = "Unhealthy"
	ReasonCreateBundleFailed    = "CreateBundleFailed"
	ReasonTooManyBundles        = "TooManyBundles"
)

// Bundle phases.
const (
	PhasePending   = "Pending"
	PhaseUnpacking = "Unpacking"
	PhaseFailing   = "Failing"
	PhaseUnpacked  = "Unpacked"
)
