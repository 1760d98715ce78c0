package v1alpha1

// Provisioner class names shipped with this project.
const (
	// ProvisionerClassPlain handles plain+v0 bundles.
	ProvisionerClassPlain = "core-rukpak-io-plain"
	// ProvisionerClassRegistry handles registry+v1 bundles, converting them to
	// plain+v0 content at unpack time.
	ProvisionerClassRegistry = "core-rukpak-io-registry"
	// ProvisionerClassHelm handles Helm charts (a chart directory, a chart
	// .tgz or Helm's OCI chart artifact), installed as Helm releases.
	ProvisionerClassHelm = "core-rukpak-io-helm"
)

// Labels stamped on generated Bundles and on every installed object.
const (
	LabelOwnerKind          = "core.rukpak.io/owner-kind"
	LabelOwnerName          = "core.rukpak.io/owner-name"
	LabelBundleTemplateHash = "core.rukpak.io/bundle-template-hash"
)

// AnnotationAllowedHosts on a git or http auth Secret lists the hosts its
// credentials are for (comma-separated: "git.example.com",
// "git.example.com:8443", "*.example.com"). Credentials are never sent to a
// host it does not list, and a Secret without it is never used: a Bundle's
// author chooses the repository URL, the Secret's owner chooses where its
// credentials may go.
const AnnotationAllowedHosts = "core.rukpak.io/allowed-hosts"

// AnnotationSkipCRDUpgradePreflight set to "true" on a BundleDeployment
// applies its Bundles' CRDs without the CRD upgrade preflight (for admins
// who know an upgrade is safe, or will fix the objects it breaks). Setting
// it takes the verb skip-crd-upgrade-preflight on the BundleDeployment
// (the webhook checks).
const AnnotationSkipCRDUpgradePreflight = "core.rukpak.io/skip-crd-upgrade-preflight"

// AnnotationReconcileRequestedAt on a BundleDeployment asks for a
// reconcile now: any change of its value (a timestamp, by convention)
// triggers one, and status.lastHandledReconcileAt records the value acted
// on (as Flux's reconcile.fluxcd.io/requestedAt).
const AnnotationReconcileRequestedAt = "core.rukpak.io/reconcile-requested-at"

// AnnotationCreatingBundle on a BundleDeployment names the first Bundle
// the provisioner is about to create for it: the creation intent, written
// in the same metadata patch as the finalizer, before the create request,
// so that a provisioner stopped between the create and the status write
// that records the Bundle's UID adopts that Bundle instead of stranding it.
// The provisioner writes it; it is not for users: the webhook lets only
// who may impersonate the provisioner's ServiceAccount set it. Still it
// proves nothing on its own: it is
// honoured only while status.generatedBundles and status.activeBundle are
// empty (before the first Bundle is recorded), only when it names exactly
// the Bundle the current template generates, and only for a Bundle
// controlled by this BundleDeployment (owner reference by UID), labelled
// for it, and whose spec equals the template. Any other value is ignored.
// It is left in place afterwards, and ignored (later Bundles' intents are
// written in status.generatedBundles, which only the provisioner writes).
const AnnotationCreatingBundle = "core.rukpak.io/creating-bundle"

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
	// TypePaused is True while a BundleDeployment's spec.paused is set.
	TypePaused = "Paused"
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
	// ReasonInstallationStatusFalse: Healthy is False because nothing is
	// installed (Installed is False and no Bundle is active).
	ReasonInstallationStatusFalse = "InstallationStatusFalse"
	ReasonCreateBundleFailed      = "CreateBundleFailed"
	ReasonTooManyBundles          = "TooManyBundles"
	ReasonPaused                  = "Paused"
	// ReasonUpgradePreflightFailed: the new Bundle's CRDs would break
	// custom resources already stored, so nothing of it was applied and the
	// active Bundle stays installed.
	ReasonUpgradePreflightFailed = "UpgradePreflightFailed"
	// ReasonUnknownShard: the object's core.rukpak.io/shard label names a
	// shard no provisioner instance serves, so nothing reconciles it.
	ReasonUnknownShard = "UnknownShard"
	// ReasonInstallPending: the install or upgrade goes on in the
	// background (a chart rendering in the slow lane, hooks running); the
	// message says what it waits for.
	ReasonInstallPending = "InstallPending"
)

// Bundle phases.
const (
	PhasePending   = "Pending"
	PhaseUnpacking = "Unpacking"
	PhaseFailing   = "Failing"
	PhaseUnpacked  = "Unpacked"
)
