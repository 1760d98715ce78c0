package helm

import "flag"

// BindFlags registers the bounds of one chart's render as flags, their
// defaults DefaultSandboxLimits'.
func (l *SandboxLimits) BindFlags(fs *flag.FlagSet) {
	d := DefaultSandboxLimits
	fs.Int64Var(&l.Memory, "helm-render-memory-bytes", d.Memory, "Address space a chart's render child may map beyond its start (slow lane; the fast lane's is --helm-render-fast-memory-bytes).")
	fs.DurationVar(&l.Timeout, "helm-render-timeout", d.Timeout, "Time a chart's render may take, its child's start included (slow lane; the fast lane's is --helm-render-fast-timeout).")
	fs.Int64Var(&l.Output, "helm-render-output-bytes", d.Output, "Largest rendered text of all of a chart's templates.")
}

// BindFlags registers how renders share their children as flags, their
// defaults DefaultRenderLanes'.
func (l *RenderLanes) BindFlags(fs *flag.FlagSet) {
	d := DefaultRenderLanes
	fs.IntVar(&l.Fast, "helm-render-fast-children", d.Fast, "Render children at once in the fast lane, where every BundleDeployment's render starts.")
	fs.DurationVar(&l.FastTimeout, "helm-render-fast-timeout", d.FastTimeout, "Time a render may take in the fast lane before it is stopped and run again in the slow lane, its BundleDeployment marked slow.")
	fs.Int64Var(&l.FastMemory, "helm-render-fast-memory-bytes", d.FastMemory, "Memory a render may map in the fast lane before it is stopped and run again in the slow lane.")
	fs.IntVar(&l.Slow, "helm-render-slow-children", d.Slow, "Render children at once in the slow lane (niced), for BundleDeployments whose renders went over the fast lane's bounds.")
}
