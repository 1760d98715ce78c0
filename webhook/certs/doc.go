// Package certs provides the webhook's serving certificates without anything
// else installed in the cluster: open-policy-agent/cert-controller keeps a CA
// and a serving certificate in a Secret, rotates them before they expire and
// injects the CA into the ValidatingWebhookConfiguration; SecretWriter copies
// the Secret into the server's certificate directory, where controller-runtime
// reloads it.
package certs
