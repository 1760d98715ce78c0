package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestIntegrationForeignRecordDelete: a release record someone else
// deletes (`kubectl delete secret`) is written again at once. Nothing
// else changes, so only the record's own watch can bring the reconcile:
// the installed objects, the BundleDeployment and its Bundle are
// untouched.
func TestIntegrationForeignRecordDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	files := map[string]string{"manifests/cm.yaml": configMap("fr-a", "v1")}
	testenv.MustNotError(t, h.c.Create(ctx, newBD("fr", h.pushBundle("fr", files))), "creating fr")
	h.waitBD("fr", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")

	deployed := func() (*corev1.Secret, error) {
		var records corev1.SecretList
		if err := h.c.List(ctx, &records, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": "fr", "status": "deployed"}); err != nil {
			return nil, err
		}
		if len(records.Items) != 1 {
			return nil, fmt.Errorf("%d deployed records of fr, want 1", len(records.Items))
		}
		return &records.Items[0], nil
	}
	var record *corev1.Secret
	eventually(t, "fr's deployed record", func() (err error) {
		record, err = deployed()
		return err
	})
	testenv.MustNotError(t, h.c.Delete(ctx, record), "deleting %s", record.Name)
	eventually(t, "fr's record written again", func() error {
		again, err := deployed()
		if err != nil {
			return err
		}
		if again.UID == record.UID {
			return fmt.Errorf("%s is still the deleted record", again.Name)
		}
		return nil
	})
	h.waitBD("fr", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
}
