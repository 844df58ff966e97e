package standin

import (
	"flag"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// The kubernetes-csi sidecars take their logging flags from k8s.io/component-base (logs/api/v1,
// with the JSON format registered) plus csi-lib-utils' --automaxprocs. component-base would pull
// its metrics stack into this module, so the same flags are declared here: every one parses as
// upstream's does, and the ones upstream refuses without the LoggingAlphaOptions feature gate (a
// gate these sidecars give no flag to enable) are refused here too.

// LoggingFlags holds the values of the sidecars' logging flags.
type LoggingFlags struct {
	format              string
	flushFrequency      time.Duration
	textSplitStream     bool
	textInfoBufferSize  resource.QuantityValue
	jsonSplitStream     bool
	jsonInfoBufferSize  resource.QuantityValue
	automaxprocsEnabled bool
}

// AddLoggingFlags declares the logging flags on fs. --v and --vmodule are klog's own, as in
// component-base: setting them sets klog's verbosity at once.
func AddLoggingFlags(fs *flag.FlagSet) *LoggingFlags {
	l := &LoggingFlags{}
	fs.StringVar(&l.format, "logging-format", "text", "Sets the log format. Permitted formats: \"json\", \"text\".")
	fs.DurationVar(&l.flushFrequency, "log-flush-frequency", 5*time.Second, "Maximum number of seconds between log flushes")
	var klogFlags flag.FlagSet
	klog.InitFlags(&klogFlags)
	for _, name := range []string{"v", "vmodule"} {
		f := klogFlags.Lookup(name)
		fs.Var(f.Value, f.Name, f.Usage)
	}
	fs.BoolVar(&l.textSplitStream, "log-text-split-stream", false, "[Alpha] In text format, write error messages to stderr and info messages to stdout.")
	fs.Var(&l.textInfoBufferSize, "log-text-info-buffer-size", "[Alpha] In text format with split output streams, the size of the info message buffer (512, 1K, 2Ki, 3M...).")
	fs.BoolVar(&l.jsonSplitStream, "log-json-split-stream", false, "[Alpha] In JSON format, write error messages to stderr and info messages to stdout.")
	fs.Var(&l.jsonInfoBufferSize, "log-json-info-buffer-size", "[Alpha] In JSON format with split output streams, the size of the info message buffer (512, 1K, 2Ki, 3M...).")
	fs.BoolVar(&l.automaxprocsEnabled, "automaxprocs", false, "automatically set GOMAXPROCS to match Linux container CPU quota (accepted; the Go runtime does this itself since Go 1.25)")
	return l
}

// Apply checks the logging flags the way component-base validates its configuration and starts
// klog's flush daemon. JSON output is accepted but written as text: nothing reads these logs
// but people.
func (l *LoggingFlags) Apply() error {
	if err := l.validate(); err != nil {
		return fmt.Errorf("logging configuration is invalid: %w", err)
	}
	klog.StartFlushDaemon(l.flushFrequency)
	return nil
}

func (l *LoggingFlags) validate() error {
	if l.format != "text" && l.format != "json" {
		return fmt.Errorf("logging-format %q is not one of the permitted formats \"json\", \"text\"", l.format)
	}
	if l.flushFrequency <= 0 {
		return fmt.Errorf("log-flush-frequency %s must be positive", l.flushFrequency)
	}
	alpha := map[string]bool{
		"log-text-split-stream":     l.textSplitStream,
		"log-text-info-buffer-size": !l.textInfoBufferSize.IsZero(),
		"log-json-split-stream":     l.jsonSplitStream,
		"log-json-info-buffer-size": !l.jsonInfoBufferSize.IsZero(),
	}
	for name, set := range alpha {
		if set {
			return fmt.Errorf("--%s needs the LoggingAlphaOptions feature gate, which is disabled", name)
		}
	}
	return nil
}
