package leaderelection

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nopClient is never called: Run rejects the Config first.
type nopClient struct{ t *testing.T }

func (c nopClient) Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error) {
	c.t.Error("Get called for an invalid Config")
	return nil, context.Canceled
}

func (c nopClient) Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error) {
	c.t.Error("Create called for an invalid Config")
	return nil, context.Canceled
}

func (c nopClient) Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	c.t.Error("Update called for an invalid Config")
	return nil, context.Canceled
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	valid := func() Config {
		return Config{
			Client:           nopClient{t},
			Namespace:        "ns",
			Name:             "lease",
			Identity:         "me",
			LeaseDuration:    15 * time.Second,
			RenewDeadline:    10 * time.Second,
			RetryPeriod:      2 * time.Second,
			OnStartedLeading: func(context.Context) {},
			OnStoppedLeading: func() {},
		}
	}
	tests := []struct {
		name   string
		modify func(*Config)
		want   []string
	}{
		{"no client", func(c *Config) { c.Client = nil }, []string{"Client is required"}},
		{"no name", func(c *Config) { c.Name = "" }, []string{"Name is required"}},
		{"no identity", func(c *Config) { c.Identity = "" }, []string{"Identity is required"}},
		{"zero lease duration", func(c *Config) { c.LeaseDuration = 0 }, []string{"LeaseDuration must be positive"}},
		{"negative renew deadline", func(c *Config) { c.RenewDeadline = -time.Second }, []string{"RenewDeadline must be positive"}},
		{"zero retry period", func(c *Config) { c.RetryPeriod = 0 }, []string{"RetryPeriod must be positive"}},
		{"lease duration equals renew deadline", func(c *Config) { c.LeaseDuration = c.RenewDeadline }, []string{"LeaseDuration (10s) must be greater than RenewDeadline (10s)"}},
		{"lease duration below renew deadline", func(c *Config) { c.LeaseDuration = 5 * time.Second }, []string{"must be greater than RenewDeadline"}},
		{"renew deadline equals 1.2 retry periods", func(c *Config) { c.RenewDeadline = 12 * time.Second; c.RetryPeriod = 10 * time.Second }, []string{"RenewDeadline (12s) must be greater than 1.2 times RetryPeriod (10s)"}},
		{"renew deadline below retry period", func(c *Config) { c.RetryPeriod = 11 * time.Second }, []string{"must be greater than 1.2 times RetryPeriod"}},
		{"no OnStartedLeading", func(c *Config) { c.OnStartedLeading = nil }, []string{"OnStartedLeading is required"}},
		{"no OnStoppedLeading", func(c *Config) { c.OnStoppedLeading = nil }, []string{"OnStoppedLeading is required"}},
		{"several problems", func(c *Config) { c.Name = ""; c.Identity = ""; c.RetryPeriod = 0 }, []string{"Name is required", "Identity is required", "RetryPeriod must be positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.modify(&cfg)
			err := Run(context.Background(), cfg)
			if err == nil {
				t.Fatal("Run accepted the config")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestValidConfigIsAccepted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run must return at once, without a request: ctx ended before anything was acquired
	cfg := Config{
		Client:           nopClient{t},
		Name:             "lease",
		Identity:         "me",
		LeaseDuration:    3 * time.Second,
		RenewDeadline:    2 * time.Second,
		RetryPeriod:      500 * time.Millisecond,
		OnStartedLeading: func(context.Context) { t.Error("OnStartedLeading called") },
		OnStoppedLeading: func() { t.Error("OnStoppedLeading called") },
	}
	// nopClient fails the test if Run makes any request.
	if err := Run(ctx, cfg); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestLeaseSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int32{
		500 * time.Millisecond:  1,
		time.Second:             1,
		1500 * time.Millisecond: 2,
		15 * time.Second:        15,
	} {
		if got := leaseSeconds(d); got != want {
			t.Errorf("leaseSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}
