package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
)

// category is the CRDs' category: `kubectl get kec` lists every kind.
const category = "kec"

// conditionPath is the JSONPath of the status of the condition typ.
func conditionPath(typ string) string {
	return fmt.Sprintf(`.status.conditions[?(@.type=="%s")].status`, typ)
}

// kindConventions is what kubectl shows of one kind.
type kindConventions struct {
	group, resource, kind string
	shortNames            []string
	// columns are the printer columns in order, as "name type jsonPath".
	columns []string
	// readyColumn shows readyCondition; degradedColumn shows degradedCondition.
	readyColumn, readyCondition, degradedColumn, degradedCondition string
	// create makes an object named "sample" in ns whose readyCondition is True
	// and whose degradedCondition is False, through the typed clientset.
	create func(ctx context.Context, ns string) error
}

var kinds = []kindConventions{
	{
		group: "example.com", resource: "envoys", kind: "Envoy", shortNames: []string{"evy"},
		columns: []string{
			"Desired integer .spec.replicas",
			"Available integer .status.availableReplicas",
			"xDS string .status.xdsServer",
			"Ready string " + conditionPath("Available"),
			"Degraded string " + conditionPath("Degraded"),
			"Age date .metadata.creationTimestamp",
		},
		readyColumn: "Ready", readyCondition: "Available", degradedColumn: "Degraded", degradedCondition: "Degraded",
		create: func(ctx context.Context, ns string) error {
			c := clientset.ExampleV1().Envoys(ns)
			o, err := c.Create(ctx, &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "sample"}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			o.Status.Conditions = readyNotDegraded("Available", "Degraded")
			_, err = c.UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		},
	},
	{
		group: "example.com", resource: "envoyconfigs", kind: "EnvoyConfig", shortNames: []string{"evc"},
		columns: []string{
			"Envoy string .spec.envoyRef",
			"Version string .status.publishedVersion",
			"Accepted string " + conditionPath("Accepted"),
			"Published string " + conditionPath("Published"),
			"Acked integer .status.proxies.acked",
			"Nacked integer .status.proxies.nacked",
			"Degraded string " + conditionPath("Degraded"),
			"Age date .metadata.creationTimestamp",
		},
		readyColumn: "Published", readyCondition: "Published", degradedColumn: "Degraded", degradedCondition: "Degraded",
		create: func(ctx context.Context, ns string) error {
			c := clientset.ExampleV1().EnvoyConfigs(ns)
			o, err := c.Create(ctx, &examplev1.EnvoyConfig{
				ObjectMeta: metav1.ObjectMeta{Name: "sample"},
				Spec:       examplev1.EnvoyConfigSpec{EnvoyRef: "sample"},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			o.Status.Conditions = readyNotDegraded("Published", "Degraded")
			_, err = c.UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		},
	},
	{
		group: "watch.my.domain", resource: "watchers", kind: "Watcher", shortNames: []string{"wtc"},
		columns: []string{
			"Container string .spec.container.name",
			"ConfigMap string .status.configMapName",
			"Ready string " + conditionPath("Ready"),
			"Degraded string " + conditionPath("Degraded"),
			"Age date .metadata.creationTimestamp",
		},
		readyColumn: "Ready", readyCondition: "Ready", degradedColumn: "Degraded", degradedCondition: "Degraded",
		create: func(ctx context.Context, ns string) error {
			c := clientset.WatchV1alpha1().Watchers(ns)
			o, err := c.Create(ctx, &watchv1alpha1.Watcher{
				ObjectMeta: metav1.ObjectMeta{Name: "sample"},
				Spec:       watchv1alpha1.WatcherSpec{Container: corev1.Container{Name: "sidecar", Image: "busybox"}},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			o.Status.Conditions = readyNotDegraded("Ready", "Degraded")
			_, err = c.UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		},
	},
	{
		group: "samplecontroller.k8s.io", resource: "foos", kind: "Foo", shortNames: []string{"fo"},
		columns: []string{
			"Deployment string .spec.deploymentName",
			"Desired integer .spec.replicas",
			"Available integer .status.availableReplicas",
			"Ready string " + conditionPath("Available"),
			"Degraded string " + conditionPath("Degraded"),
			"Age date .metadata.creationTimestamp",
		},
		readyColumn: "Ready", readyCondition: "Available", degradedColumn: "Degraded", degradedCondition: "Degraded",
		create: func(ctx context.Context, ns string) error {
			c := clientset.SamplecontrollerV1alpha1().Foos(ns)
			o, err := c.Create(ctx, &samplev1alpha1.Foo{
				ObjectMeta: metav1.ObjectMeta{Name: "sample"},
				Spec:       samplev1alpha1.FooSpec{DeploymentName: "sample"},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			o.Status.Conditions = readyNotDegraded("Available", "Degraded")
			_, err = c.UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		},
	},
	{
		// PodSet's Ready column counts ready pods, as a ReplicaSet's does; its
		// readiness condition is Available; Degraded is its trouble column, as
		// on every kind (ReplicaFailure, as on a ReplicaSet, comes with it).
		group: "demo.k8s.io", resource: "podsets", kind: "PodSet", shortNames: []string{"ps"},
		columns: []string{
			"Desired integer .spec.replicas",
			"Current integer .status.replicas",
			"Ready integer .status.readyReplicas",
			"Available integer .status.availableReplicas",
			"Degraded string " + conditionPath("Degraded"),
			"Age date .metadata.creationTimestamp",
		},
		degradedColumn: "Degraded", degradedCondition: "Degraded",
		create: func(ctx context.Context, ns string) error {
			c := clientset.DemoV1alpha1().PodSets(ns)
			o, err := c.Create(ctx, &demov1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "sample"}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			o.Status.Conditions = readyNotDegraded("Available", "Degraded")
			_, err = c.UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		},
	},
	{
		group: "k8s.io", resource: "foobars", kind: "FooBar", shortNames: []string{"fb"},
		columns: []string{
			"Command string .spec.command",
			"Job string .status.jobName",
			"Phase string .status.phase",
			"Complete string " + conditionPath("Complete"),
			"Degraded string " + conditionPath("Degraded"),
			"Age date .metadata.creationTimestamp",
		},
		readyColumn: "Complete", readyCondition: "Complete", degradedColumn: "Degraded", degradedCondition: "Degraded",
		create: func(ctx context.Context, ns string) error {
			c := clientset.K8sV1().FooBars(ns)
			o, err := c.Create(ctx, &k8sv1.FooBar{
				ObjectMeta: metav1.ObjectMeta{Name: "sample"},
				Spec:       k8sv1.FooBarSpec{Command: "true"},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			o.Status.Conditions = readyNotDegraded("Complete", "Degraded")
			_, err = c.UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		},
	},
}

func readyNotDegraded(ready, degraded string) []metav1.Condition {
	return []metav1.Condition{condition(ready, metav1.ConditionTrue), condition(degraded, metav1.ConditionFalse)}
}

// TestCRDConventions reads the installed CRDs: short names, the category and
// the printer columns.
func TestCRDConventions(t *testing.T) {
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crds, err := ext.ApiextensionsV1().CustomResourceDefinitions().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(crds.Items) != len(kinds) {
		t.Errorf("%d CRDs installed, the table below knows %d kinds", len(crds.Items), len(kinds))
	}
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) {
			crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), k.resource+"."+k.group, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := crd.Spec.Names.ShortNames; !slices.Equal(got, k.shortNames) {
				t.Errorf("short names %v, want %v", got, k.shortNames)
			}
			if got := crd.Spec.Names.Categories; !slices.Equal(got, []string{category}) {
				t.Errorf("categories %v, want [%s]", got, category)
			}
			for _, v := range crd.Spec.Versions {
				var got []string
				for _, c := range v.AdditionalPrinterColumns {
					got = append(got, c.Name+" "+c.Type+" "+c.JSONPath)
				}
				if !slices.Equal(got, k.columns) {
					t.Errorf("version %s printer columns:\n  %s\nwant:\n  %s", v.Name, strings.Join(got, "\n  "), strings.Join(k.columns, "\n  "))
				}
			}
		})
	}
}

// TestCategoryListsEveryKind checks the kec category in discovery, which is
// what kubectl expands, and then `kubectl get kec` itself.
func TestCategoryListsEveryKind(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	var inCategory, want []string
	for _, l := range lists {
		for _, r := range l.APIResources {
			if slices.Contains(r.Categories, category) {
				inCategory = append(inCategory, r.Kind)
			}
		}
	}
	for _, k := range kinds {
		want = append(want, k.kind)
	}
	slices.Sort(inCategory)
	slices.Sort(want)
	if !slices.Equal(inCategory, want) {
		t.Errorf("discovery: category %s holds %v, want %v", category, inCategory, want)
	}

	ctx := context.Background()
	ns := namespace(t)
	for _, k := range kinds {
		if err := k.create(ctx, ns); err != nil {
			t.Fatalf("creating a %s: %v", k.kind, err)
		}
	}
	out := kubectl.Run(t, "get", category, "-n", ns, "-o", "name")
	names, wantNames := strings.Fields(out), []string(nil)
	for _, k := range kinds {
		wantNames = append(wantNames, k.resource[:len(k.resource)-1]+"."+k.group+"/sample")
	}
	slices.Sort(names)
	slices.Sort(wantNames)
	if !slices.Equal(names, wantNames) {
		t.Errorf("kubectl get %s -o name:\n%s\nwant %v", category, out, wantNames)
	}
}

// TestShortNamesAreFree checks, in discovery, that no short name of our kinds
// is the name, the singular or a short name of a resource the API server has
// built in, or another name of ours.
func TestShortNamesAreFree(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	isOurs := map[string]bool{}
	for _, k := range kinds {
		isOurs[k.group] = true
	}
	taken := map[string]string{}  // a built-in name -> the resource that has it
	ours := map[string][]string{} // our names -> the kinds that have them
	var shortNames []string
	builtins := 0
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue // a subresource
			}
			names := append([]string{r.Name, r.SingularName, strings.ToLower(r.Kind)}, r.ShortNames...)
			if !isOurs[gv.Group] {
				builtins++
				for _, n := range names {
					taken[n] = r.Name + "." + gv.Group
				}
				continue
			}
			shortNames = append(shortNames, r.ShortNames...)
			for _, n := range names {
				if !slices.Contains(ours[n], r.Kind) {
					ours[n] = append(ours[n], r.Kind)
				}
			}
		}
	}
	if builtins < 40 || taken["po"] == "" || taken["deploy"] == "" {
		t.Fatalf("discovery found %d built-in resources, without po or deploy: not the built-in API", builtins)
	}
	if len(shortNames) < len(kinds) {
		t.Errorf("discovery shows %d short names %v for our %d kinds", len(shortNames), shortNames, len(kinds))
	}
	for _, s := range shortNames {
		if owner, clash := taken[s]; clash {
			t.Errorf("%s's short name %q is taken by %s", ours[s][0], s, owner)
		}
	}
	for n, owners := range ours {
		if len(owners) > 1 {
			t.Errorf("%q names %v", n, owners)
		}
	}
}

// TestPrinterColumnValues asks the API server for tables, as kubectl does,
// and checks that the Ready and Degraded columns show the conditions.
func TestPrinterColumnValues(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) {
			if err := k.create(ctx, ns); err != nil {
				t.Fatal(err)
			}
			table := serverTable(t, k.group, k.resource, ns)
			if len(table.Rows) != 1 {
				t.Fatalf("%d rows, want 1", len(table.Rows))
			}
			cell := func(column string) any {
				for i, c := range table.ColumnDefinitions {
					if c.Name == column {
						return table.Rows[0].Cells[i]
					}
				}
				t.Fatalf("no column %s in %v", column, table.ColumnDefinitions)
				return nil
			}
			if k.readyColumn != "" {
				if got := cell(k.readyColumn); got != "True" {
					t.Errorf("%s column: %v, want True (the %s condition)", k.readyColumn, got, k.readyCondition)
				}
			}
			if got := cell(k.degradedColumn); got != "False" {
				t.Errorf("%s column: %v, want False (the %s condition)", k.degradedColumn, got, k.degradedCondition)
			}
			// The short name reaches the kind in kubectl, and its table has every column.
			header := strings.Fields(strings.SplitN(kubectl.Run(t, "get", k.shortNames[0], "-n", ns), "\n", 2)[0])
			want := []string{"NAME"}
			for _, c := range k.columns {
				want = append(want, strings.ToUpper(strings.Fields(c)[0]))
			}
			if !slices.Equal(header, want) {
				t.Errorf("kubectl get %s: header %v, want %v", k.shortNames[0], header, want)
			}
		})
	}
}

// serverTable lists resource in ns as a server-side Table, through the
// generated REST client of the group.
func serverTable(t *testing.T, group, resource, ns string) *metav1.Table {
	t.Helper()
	clients := map[string]rest.Interface{
		"example.com":             clientset.ExampleV1().RESTClient(),
		"watch.my.domain":         clientset.WatchV1alpha1().RESTClient(),
		"samplecontroller.k8s.io": clientset.SamplecontrollerV1alpha1().RESTClient(),
		"demo.k8s.io":             clientset.DemoV1alpha1().RESTClient(),
		"k8s.io":                  clientset.K8sV1().RESTClient(),
	}
	raw, err := clients[group].Get().Namespace(ns).Resource(resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(raw, table); err != nil {
		t.Fatal(err)
	}
	return table
}
