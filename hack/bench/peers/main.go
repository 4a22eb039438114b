// Command zkop-go-peer is the benchmark's Go peer of zkop (issue 42): the smallest honest operator a Go engineer
// would write on controller-runtime for zkop's core job, so that `python -m hack.bench --scenario peers` can run
// both side by side on the real control plane. Benchmark tooling only: never shipped, never run in a cluster.
//
// What it does, per ZooKeeperConfig (platform.example.com/v1alpha1, read as unstructured from the manager's cache):
//
//   - adds zkop's finalizer (a JSON merge patch of metadata.finalizers);
//   - reads the znode at spec.path (under the chroot of --zk-servers) and creates it from spec.data (base64),
//     creating missing parents, or sets it when its bytes differ (not with syncPolicy createOnly);
//   - writes status (a merge patch of /status) only when it changes: state, message, observedGeneration,
//     znodeVersion, lastSyncedTime and a Ready condition, the shape zkop writes;
//   - on deletion deletes the znode (any version) and removes the finalizer.
//
// What it does not do (zkop does): watch znodes for drift, keep ownership records of paths, emit Events, read
// spec.stringData/dataFrom/acl/encoding/deletionPolicy, validate the spec beyond what the CRD's schema does,
// elect a leader (the bench runs zkop without --leader-elect too). Reconciles are triggered by generation
// changes only (predicate.GenerationChangedPredicate, as kubebuilder projects commonly do): status and
// finalizer echoes start no reconcile; a deletion bumps the generation of an object that has finalizers.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

const finalizer = "zookeeperconfigs.platform.example.com/finalizer"

var gvk = schema.GroupVersionKind{Group: "platform.example.com", Version: "v1alpha1", Kind: "ZooKeeperConfig"}

// reconciler keeps one ZooKeeperConfig's znode and status in line with its spec.
type reconciler struct {
	client.Client
	zk     *zk.Conn
	chroot string
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	specPath, _, _ := unstructured.NestedString(obj.Object, "spec", "path")
	path := r.chroot + specPath
	if !obj.GetDeletionTimestamp().IsZero() {
		if !controllerutil.ContainsFinalizer(obj, finalizer) {
			return ctrl.Result{}, nil
		}
		if err := r.zk.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return ctrl.Result{}, fmt.Errorf("delete znode %s: %w", specPath, err)
		}
		base := obj.DeepCopy()
		controllerutil.RemoveFinalizer(obj, finalizer)
		return ctrl.Result{}, r.Patch(ctx, obj, client.MergeFrom(base))
	}
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		base := obj.DeepCopy()
		controllerutil.AddFinalizer(obj, finalizer)
		if err := r.Patch(ctx, obj, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, err
		}
	}
	encoded, _, _ := unstructured.NestedString(obj.Object, "spec", "data")
	data, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return ctrl.Result{}, r.setStatus(ctx, obj, "Error", "InvalidSpec", "spec.data: "+err.Error(), nil, false)
	}
	policy, _, _ := unstructured.NestedString(obj.Object, "spec", "syncPolicy")
	reason, message, version, wrote, err := r.sync(path, specPath, data, policy != "createOnly")
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.setStatus(ctx, obj, "Synced", reason, message, &version, wrote)
}

// sync makes the znode at path hold data (creating it and its parents, or setting it when allowed); returns the
// Ready condition's reason and message, the znode's data version, and whether ZooKeeper was written.
func (r *reconciler) sync(path, specPath string, data []byte, update bool) (string, string, int32, bool, error) {
	current, stat, err := r.zk.Get(path)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		if err := r.create(path, data); err != nil {
			return "", "", 0, false, fmt.Errorf("create znode %s: %w", specPath, err)
		}
		return "Created", fmt.Sprintf("znode %s created (%d bytes)", specPath, len(data)), 0, true, nil
	case err != nil:
		return "", "", 0, false, fmt.Errorf("read znode %s: %w", specPath, err)
	case bytes.Equal(current, data) || !update:
		return "InSync", fmt.Sprintf("znode %s in sync (%d bytes)", specPath, len(current)), stat.Version, false, nil
	}
	stat, err = r.zk.Set(path, data, stat.Version)
	if err != nil {
		return "", "", 0, false, fmt.Errorf("set znode %s: %w", specPath, err)
	}
	return "Updated", fmt.Sprintf("znode %s updated (%d bytes)", specPath, len(data)), stat.Version, true, nil
}

// create creates path with data, and its missing parents (empty) if it has to.
func (r *reconciler) create(path string, data []byte) error {
	acl := zk.WorldACL(zk.PermAll)
	_, err := r.zk.Create(path, data, 0, acl)
	if !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 1; i < len(parts); i++ {
		parent := "/" + strings.Join(parts[:i], "/")
		if _, err := r.zk.Create(parent, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	_, err = r.zk.Create(path, data, 0, acl)
	return err
}

// setStatus merge-patches /status when state, message, observedGeneration, znodeVersion or the Ready condition
// differ from what is there (lastSyncedTime moves only when ZooKeeper was written, lastTransitionTime only when
// the condition's status changes).
func (r *reconciler) setStatus(ctx context.Context, obj *unstructured.Unstructured, state, reason, message string,
	version *int32, wrote bool) error {
	old, _, _ := unstructured.NestedMap(obj.Object, "status")
	ready := "True"
	if state != "Synced" {
		ready = "False"
	}
	now := time.Now().UTC().Format(time.RFC3339)
	transition := now
	if conditions, ok := old["conditions"].([]interface{}); ok && len(conditions) == 1 {
		if c, ok := conditions[0].(map[string]interface{}); ok && c["status"] == ready {
			transition, _ = c["lastTransitionTime"].(string)
		}
	}
	status := map[string]interface{}{
		"state":              state,
		"message":            message,
		"observedGeneration": obj.GetGeneration(),
		"conditions": []interface{}{map[string]interface{}{
			"type": "Ready", "status": ready, "reason": reason, "message": message,
			"observedGeneration": obj.GetGeneration(), "lastTransitionTime": transition,
		}},
	}
	if version != nil {
		status["znodeVersion"] = int64(*version)
	} else if v, ok := old["znodeVersion"]; ok {
		status["znodeVersion"] = v
	}
	if t, ok := old["lastSyncedTime"]; ok {
		status["lastSyncedTime"] = t
	}
	if !wrote && reflect.DeepEqual(normalize(old), normalize(status)) {
		return nil
	}
	if wrote {
		status["lastSyncedTime"] = now
	}
	base := obj.DeepCopy()
	if err := unstructured.SetNestedField(obj.Object, status, "status"); err != nil {
		return err
	}
	return r.Status().Patch(ctx, obj, client.MergeFrom(base))
}

// normalize gives the status's numbers one type (the cache decodes JSON numbers as int64), so that an unchanged
// status compares equal.
func normalize(v interface{}) interface{} {
	switch t := v.(type) {
	case int32:
		return int64(t)
	case int:
		return int64(t)
	case map[string]interface{}:
		out := make(map[string]interface{}, len(t))
		for k, e := range t {
			out[k] = normalize(e)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, e := range t {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}

// splitServers splits a ZooKeeper connect string ("h1:p1,h2:p2/chroot") into servers and chroot ("" for none).
func splitServers(connect string) ([]string, string) {
	chroot := ""
	if i := strings.Index(connect, "/"); i >= 0 {
		connect, chroot = connect[:i], strings.TrimRight(connect[i:], "/")
	}
	return strings.Split(connect, ","), chroot
}

func main() {
	var workers int
	var zkServers, metricsAddr, probeAddr string
	var qps float64
	var burst int
	flag.IntVar(&workers, "workers", 1, "concurrent reconciles (controller-runtime's MaxConcurrentReconciles)")
	flag.StringVar(&zkServers, "zk-servers", "127.0.0.1:2181", "ZooKeeper connect string, host:port[,host:port][/chroot]")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "/metrics address; 0 disables")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "0", "/healthz and /readyz address; 0 disables")
	flag.Float64Var(&qps, "kube-api-qps", 20, "client-side requests per second to the API server; negative: no limit")
	flag.IntVar(&burst, "kube-api-burst", 30, "client-side burst")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse() // --kubeconfig is registered by controller-runtime's config package
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("zkop-go-peer")

	servers, chroot := splitServers(zkServers)
	conn, _, err := zk.Connect(servers, 30*time.Second, zk.WithLogger(zkLogger{}))
	if err != nil {
		log.Error(err, "connect to ZooKeeper")
		os.Exit(1)
	}
	defer conn.Close()

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(qps), burst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		Client:                 client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		log.Error(err, "create manager")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		log.Error(err, "add healthz check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		log.Error(err, "add readyz check")
		os.Exit(1)
	}
	watched := &unstructured.Unstructured{}
	watched.SetGroupVersionKind(gvk)
	err = ctrl.NewControllerManagedBy(mgr).
		Named("zookeeperconfig").
		For(watched, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(&reconciler{Client: mgr.GetClient(), zk: conn, chroot: chroot})
	if err != nil {
		log.Error(err, "create controller")
		os.Exit(1)
	}
	log.Info("starting", "workers", workers, "zkServers", zkServers, "qps", qps)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// zkLogger sends go-zookeeper's connection messages to controller-runtime's logger.
type zkLogger struct{}

func (zkLogger) Printf(format string, args ...interface{}) {
	ctrl.Log.WithName("zk").V(1).Info(fmt.Sprintf(format, args...))
}
