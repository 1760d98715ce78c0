package install

import (
	"context"
	"sync"
	"time"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// What may take long for a release (its chart rendering in the slow lane,
// an install or upgrade waiting for its hooks, for up to
// spec.config.timeout) runs in a job in the background, not in the class's
// few controller workers: a worker waits for a job at most JobWait (or
// until its render goes to the slow lane), then answers with a
// bundledeployment.PendingError saying what the job waits for, and the
// job's end reconciles the BundleDeployment again (an event on the
// controller's channel, SetupWatches), whose reconcile takes the job's
// outcome. A release has one job at a time: a render for inputs that
// changed since is cancelled; an action runs to its end (Helm records its
// revision), unless the release is uninstalled, which stops its hook
// waits. Without SetupWatches (nobody to tell), jobs run in the caller.

// DefaultJobWait is how long a worker waits for a job: most renders and
// installs are done by then, and their reconcile goes on with no status
// write in between.
const DefaultJobWait = 2 * time.Second

type jobs struct {
	mu sync.Mutex
	m  map[string]*job
	// notify, nil until SetupWatches, reconciles a BundleDeployment.
	notify chan event.GenericEvent
}

// job is one render or action of a release.
type job struct {
	name string
	key  any
	// action jobs are not cancelled for newer inputs.
	action bool
	cancel context.CancelFunc
	done   chan struct{}
	// slow is closed when waiting for the job is pointless (its render
	// went to the slow lane).
	slow     chan struct{}
	slowOnce sync.Once

	mu     sync.Mutex
	status string
	waited bool
	value  any
	err    error
}

func (j *job) setStatus(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.status = s
}

// goneSlow stops the workers' wait for the job.
func (j *job) goneSlow() { j.slowOnce.Do(func() { close(j.slow) }) }

func (j *job) finished() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// jobs returns the Installer's jobs, shared with the Installers As
// returns.
func (in *Installer) jobs() *jobs {
	rendersInit.Lock()
	defer rendersInit.Unlock()
	if in.running == nil {
		in.running = &jobs{m: map[string]*job{}}
	}
	return in.running
}

func (in *Installer) jobWait() time.Duration {
	if in.JobWait > 0 {
		return in.JobWait
	}
	return DefaultJobWait
}

// run returns the outcome of release name's job for key, starting it with
// fn if there is none, after waiting for it at most the Installer's
// JobWait; a PendingError (what the job waits for, with status's words)
// if it is not done by then. A job for another key is cancelled first (a
// render), or waited for (an action).
func (in *Installer) run(ctx context.Context, name string, key any, action bool, status string, fn func(ctx context.Context, j *job) (any, error)) (any, error) {
	js := in.jobs()
	js.mu.Lock()
	if js.notify == nil {
		js.mu.Unlock()
		return fn(ctx, &job{slow: make(chan struct{}), done: make(chan struct{})})
	}
	j := js.m[name]
	switch {
	case j != nil && j.key == key:
	case j != nil && j.action && !j.finished():
		js.mu.Unlock()
		return nil, j.pending("the previous install or upgrade is still running: ")
	default:
		if j != nil {
			j.cancel()
		}
		jctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		j = &job{name: name, key: key, action: action, cancel: cancel, done: make(chan struct{}), slow: make(chan struct{}), status: status}
		js.m[name] = j
		go js.do(jctx, j, fn)
	}
	js.mu.Unlock()
	return in.await(ctx, j)
}

// poll returns the outcome of release name's action job, if it ran for
// key; a PendingError while it runs (an action for another key too);
// ok is false when there is no action job.
func (in *Installer) poll(ctx context.Context, name string, key any) (_ any, _ error, ok bool) {
	js := in.jobs()
	js.mu.Lock()
	j := js.m[name]
	switch {
	case j == nil || !j.action:
		js.mu.Unlock()
		return nil, nil, false
	case j.key != key && j.finished():
		// Stale: the next action is for other inputs.
		delete(js.m, name)
		js.mu.Unlock()
		return nil, nil, false
	case j.key != key:
		js.mu.Unlock()
		return nil, j.pending("the previous install or upgrade is still running: "), true
	}
	js.mu.Unlock()
	v, err := in.await(ctx, j)
	return v, err, true
}

// busy returns a PendingError while release name's action job runs.
func (in *Installer) busy(name string) error {
	js := in.jobs()
	js.mu.Lock()
	defer js.mu.Unlock()
	if j := js.m[name]; j != nil && j.action && !j.finished() {
		return j.pending("")
	}
	return nil
}

// stop cancels release name's job and forgets it: nil once it has ended,
// else a PendingError until it has (an action ends once Helm recorded its
// revision).
func (in *Installer) stop(name string) error {
	js := in.jobs()
	js.mu.Lock()
	defer js.mu.Unlock()
	j := js.m[name]
	if j == nil {
		return nil
	}
	j.cancel()
	if !j.action || j.finished() {
		delete(js.m, name)
		return nil
	}
	j.mu.Lock()
	j.waited = true
	j.mu.Unlock()
	return j.pending("uninstalling once the install or upgrade in progress stopped: ")
}

// await waits for j at most JobWait, and takes its outcome if it ended.
func (in *Installer) await(ctx context.Context, j *job) (any, error) {
	t := time.NewTimer(in.jobWait())
	defer t.Stop()
	select {
	case <-j.done:
	case <-j.slow:
	case <-t.C:
	case <-ctx.Done():
	}
	j.mu.Lock()
	if !j.finished() {
		j.waited = true
		j.mu.Unlock()
		return nil, j.pending("")
	}
	j.mu.Unlock()
	js := in.jobs()
	js.mu.Lock()
	if js.m[j.name] == j {
		delete(js.m, j.name)
	}
	js.mu.Unlock()
	return j.value, j.err
}

func (js *jobs) do(ctx context.Context, j *job, fn func(ctx context.Context, j *job) (any, error)) {
	v, err := fn(ctx, j)
	j.cancel()
	j.mu.Lock()
	j.value, j.err = v, err
	close(j.done)
	waited := j.waited
	j.mu.Unlock()
	if !waited {
		return
	}
	bd := &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: j.name}}
	select {
	case js.notify <- event.GenericEvent{Object: bd}:
	default:
		// Full: the pending BundleDeployment is looked at again
		// within its recheck.
	}
}

func (j *job) pending(prefix string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return &bundledeployment.PendingError{Message: prefix + j.status}
}

// cancelRenders cancels every render job.
func (js *jobs) cancelRenders() {
	js.mu.Lock()
	defer js.mu.Unlock()
	for _, j := range js.m {
		if !j.action {
			j.cancel()
		}
	}
}
