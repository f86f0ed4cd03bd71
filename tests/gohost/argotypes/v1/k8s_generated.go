// Code generated from the field lists of k8s.io/api v0.34.5 (core/v1, batch/v1) and
// k8s.io/apimachinery v0.34.5 (meta/v1, types): every named type reachable from batchv1.JobSpec,
// with the same type and field names and field types, and no tags, comments or methods.
// gob describes a struct by its type name and exported field names and types, and an unnamed
// slice or map type by its Go spelling ("[]v1.Container"), which is why all of them live in one
// package named v1, like the three originals. Time, Quantity, IntOrString and TypeMeta are in
// special.go.

package v1

type AWSElasticBlockStoreVolumeSource struct {
	VolumeID  string
	FSType    string
	Partition int32
	ReadOnly  bool
}

type Affinity struct {
	NodeAffinity    *NodeAffinity
	PodAffinity     *PodAffinity
	PodAntiAffinity *PodAntiAffinity
}

type AppArmorProfile struct {
	Type             AppArmorProfileType
	LocalhostProfile *string
}

type AppArmorProfileType string

type AzureDataDiskCachingMode string

type AzureDataDiskKind string

type AzureDiskVolumeSource struct {
	DiskName    string
	DataDiskURI string
	CachingMode *AzureDataDiskCachingMode
	FSType      *string
	ReadOnly    *bool
	Kind        *AzureDataDiskKind
}

type AzureFileVolumeSource struct {
	SecretName string
	ShareName  string
	ReadOnly   bool
}

type CSIVolumeSource struct {
	Driver               string
	ReadOnly             *bool
	FSType               *string
	VolumeAttributes     map[string]string
	NodePublishSecretRef *LocalObjectReference
}

type Capabilities struct {
	Add  []Capability
	Drop []Capability
}

type Capability string

type CephFSVolumeSource struct {
	Monitors   []string
	Path       string
	User       string
	SecretFile string
	SecretRef  *LocalObjectReference
	ReadOnly   bool
}

type CinderVolumeSource struct {
	VolumeID  string
	FSType    string
	ReadOnly  bool
	SecretRef *LocalObjectReference
}

type ClusterTrustBundleProjection struct {
	Name          *string
	SignerName    *string
	LabelSelector *LabelSelector
	Optional      *bool
	Path          string
}

type CompletionMode string

type ConditionStatus string

type ConfigMapEnvSource struct {
	LocalObjectReference
	Optional *bool
}

type ConfigMapKeySelector struct {
	LocalObjectReference
	Key      string
	Optional *bool
}

type ConfigMapProjection struct {
	LocalObjectReference
	Items    []KeyToPath
	Optional *bool
}

type ConfigMapVolumeSource struct {
	LocalObjectReference
	Items       []KeyToPath
	DefaultMode *int32
	Optional    *bool
}

type Container struct {
	Name                     string
	Image                    string
	Command                  []string
	Args                     []string
	WorkingDir               string
	Ports                    []ContainerPort
	EnvFrom                  []EnvFromSource
	Env                      []EnvVar
	Resources                ResourceRequirements
	ResizePolicy             []ContainerResizePolicy
	RestartPolicy            *ContainerRestartPolicy
	RestartPolicyRules       []ContainerRestartRule
	VolumeMounts             []VolumeMount
	VolumeDevices            []VolumeDevice
	LivenessProbe            *Probe
	ReadinessProbe           *Probe
	StartupProbe             *Probe
	Lifecycle                *Lifecycle
	TerminationMessagePath   string
	TerminationMessagePolicy TerminationMessagePolicy
	ImagePullPolicy          PullPolicy
	SecurityContext          *SecurityContext
	Stdin                    bool
	StdinOnce                bool
	TTY                      bool
}

type ContainerPort struct {
	Name          string
	HostPort      int32
	ContainerPort int32
	Protocol      Protocol
	HostIP        string
}

type ContainerResizePolicy struct {
	ResourceName  ResourceName
	RestartPolicy ResourceResizeRestartPolicy
}

type ContainerRestartPolicy string

type ContainerRestartRule struct {
	Action    ContainerRestartRuleAction
	ExitCodes *ContainerRestartRuleOnExitCodes
}

type ContainerRestartRuleAction string

type ContainerRestartRuleOnExitCodes struct {
	Operator ContainerRestartRuleOnExitCodesOperator
	Values   []int32
}

type ContainerRestartRuleOnExitCodesOperator string

type DNSPolicy string

type DownwardAPIProjection struct {
	Items []DownwardAPIVolumeFile
}

type DownwardAPIVolumeFile struct {
	Path             string
	FieldRef         *ObjectFieldSelector
	ResourceFieldRef *ResourceFieldSelector
	Mode             *int32
}

type DownwardAPIVolumeSource struct {
	Items       []DownwardAPIVolumeFile
	DefaultMode *int32
}

type EmptyDirVolumeSource struct {
	Medium    StorageMedium
	SizeLimit *Quantity
}

type EnvFromSource struct {
	Prefix       string
	ConfigMapRef *ConfigMapEnvSource
	SecretRef    *SecretEnvSource
}

type EnvVar struct {
	Name      string
	Value     string
	ValueFrom *EnvVarSource
}

type EnvVarSource struct {
	FieldRef         *ObjectFieldSelector
	ResourceFieldRef *ResourceFieldSelector
	ConfigMapKeyRef  *ConfigMapKeySelector
	SecretKeyRef     *SecretKeySelector
	FileKeyRef       *FileKeySelector
}

type EphemeralContainer struct {
	EphemeralContainerCommon
	TargetContainerName string
}

type EphemeralContainerCommon struct {
	Name                     string
	Image                    string
	Command                  []string
	Args                     []string
	WorkingDir               string
	Ports                    []ContainerPort
	EnvFrom                  []EnvFromSource
	Env                      []EnvVar
	Resources                ResourceRequirements
	ResizePolicy             []ContainerResizePolicy
	RestartPolicy            *ContainerRestartPolicy
	RestartPolicyRules       []ContainerRestartRule
	VolumeMounts             []VolumeMount
	VolumeDevices            []VolumeDevice
	LivenessProbe            *Probe
	ReadinessProbe           *Probe
	StartupProbe             *Probe
	Lifecycle                *Lifecycle
	TerminationMessagePath   string
	TerminationMessagePolicy TerminationMessagePolicy
	ImagePullPolicy          PullPolicy
	SecurityContext          *SecurityContext
	Stdin                    bool
	StdinOnce                bool
	TTY                      bool
}

type EphemeralVolumeSource struct {
	VolumeClaimTemplate *PersistentVolumeClaimTemplate
}

type ExecAction struct {
	Command []string
}

type FCVolumeSource struct {
	TargetWWNs []string
	Lun        *int32
	FSType     string
	ReadOnly   bool
	WWIDs      []string
}

type FieldsV1 struct {
	Raw []byte
}

type FileKeySelector struct {
	VolumeName string
	Path       string
	Key        string
	Optional   *bool
}

type FlexVolumeSource struct {
	Driver    string
	FSType    string
	SecretRef *LocalObjectReference
	ReadOnly  bool
	Options   map[string]string
}

type FlockerVolumeSource struct {
	DatasetName string
	DatasetUUID string
}

type GCEPersistentDiskVolumeSource struct {
	PDName    string
	FSType    string
	Partition int32
	ReadOnly  bool
}

type GRPCAction struct {
	Port    int32
	Service *string
}

type GitRepoVolumeSource struct {
	Repository string
	Revision   string
	Directory  string
}

type GlusterfsVolumeSource struct {
	EndpointsName string
	Path          string
	ReadOnly      bool
}

type HTTPGetAction struct {
	Path        string
	Port        IntOrString
	Host        string
	Scheme      URIScheme
	HTTPHeaders []HTTPHeader
}

type HTTPHeader struct {
	Name  string
	Value string
}

type HostAlias struct {
	IP        string
	Hostnames []string
}

type HostPathType string

type HostPathVolumeSource struct {
	Path string
	Type *HostPathType
}

type ISCSIVolumeSource struct {
	TargetPortal      string
	IQN               string
	Lun               int32
	ISCSIInterface    string
	FSType            string
	ReadOnly          bool
	Portals           []string
	DiscoveryCHAPAuth bool
	SessionCHAPAuth   bool
	SecretRef         *LocalObjectReference
	InitiatorName     *string
}

type ImageVolumeSource struct {
	Reference  string
	PullPolicy PullPolicy
}

type JobSpec struct {
	Parallelism             *int32
	Completions             *int32
	ActiveDeadlineSeconds   *int64
	PodFailurePolicy        *PodFailurePolicy
	SuccessPolicy           *SuccessPolicy
	BackoffLimit            *int32
	BackoffLimitPerIndex    *int32
	MaxFailedIndexes        *int32
	Selector                *LabelSelector
	ManualSelector          *bool
	Template                PodTemplateSpec
	TTLSecondsAfterFinished *int32
	CompletionMode          *CompletionMode
	Suspend                 *bool
	PodReplacementPolicy    *PodReplacementPolicy
	ManagedBy               *string
}

type KeyToPath struct {
	Key  string
	Path string
	Mode *int32
}

type LabelSelector struct {
	MatchLabels      map[string]string
	MatchExpressions []LabelSelectorRequirement
}

type LabelSelectorOperator string

type LabelSelectorRequirement struct {
	Key      string
	Operator LabelSelectorOperator
	Values   []string
}

type Lifecycle struct {
	PostStart  *LifecycleHandler
	PreStop    *LifecycleHandler
	StopSignal *Signal
}

type LifecycleHandler struct {
	Exec      *ExecAction
	HTTPGet   *HTTPGetAction
	TCPSocket *TCPSocketAction
	Sleep     *SleepAction
}

type LocalObjectReference struct {
	Name string
}

type ManagedFieldsEntry struct {
	Manager     string
	Operation   ManagedFieldsOperationType
	APIVersion  string
	Time        *Time
	FieldsType  string
	FieldsV1    *FieldsV1
	Subresource string
}

type ManagedFieldsOperationType string

type MountPropagationMode string

type NFSVolumeSource struct {
	Server   string
	Path     string
	ReadOnly bool
}

type NodeAffinity struct {
	RequiredDuringSchedulingIgnoredDuringExecution  *NodeSelector
	PreferredDuringSchedulingIgnoredDuringExecution []PreferredSchedulingTerm
}

type NodeInclusionPolicy string

type NodeSelector struct {
	NodeSelectorTerms []NodeSelectorTerm
}

type NodeSelectorOperator string

type NodeSelectorRequirement struct {
	Key      string
	Operator NodeSelectorOperator
	Values   []string
}

type NodeSelectorTerm struct {
	MatchExpressions []NodeSelectorRequirement
	MatchFields      []NodeSelectorRequirement
}

type OSName string

type ObjectFieldSelector struct {
	APIVersion string
	FieldPath  string
}

type ObjectMeta struct {
	Name                       string
	GenerateName               string
	Namespace                  string
	SelfLink                   string
	UID                        UID
	ResourceVersion            string
	Generation                 int64
	CreationTimestamp          Time
	DeletionTimestamp          *Time
	DeletionGracePeriodSeconds *int64
	Labels                     map[string]string
	Annotations                map[string]string
	OwnerReferences            []OwnerReference
	Finalizers                 []string
	ManagedFields              []ManagedFieldsEntry
}

type OwnerReference struct {
	APIVersion         string
	Kind               string
	Name               string
	UID                UID
	Controller         *bool
	BlockOwnerDeletion *bool
}

type PersistentVolumeAccessMode string

type PersistentVolumeClaimSpec struct {
	AccessModes               []PersistentVolumeAccessMode
	Selector                  *LabelSelector
	Resources                 VolumeResourceRequirements
	VolumeName                string
	StorageClassName          *string
	VolumeMode                *PersistentVolumeMode
	DataSource                *TypedLocalObjectReference
	DataSourceRef             *TypedObjectReference
	VolumeAttributesClassName *string
}

type PersistentVolumeClaimTemplate struct {
	ObjectMeta
	Spec PersistentVolumeClaimSpec
}

type PersistentVolumeClaimVolumeSource struct {
	ClaimName string
	ReadOnly  bool
}

type PersistentVolumeMode string

type PhotonPersistentDiskVolumeSource struct {
	PdID   string
	FSType string
}

type PodAffinity struct {
	RequiredDuringSchedulingIgnoredDuringExecution  []PodAffinityTerm
	PreferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm
}

type PodAffinityTerm struct {
	LabelSelector     *LabelSelector
	Namespaces        []string
	TopologyKey       string
	NamespaceSelector *LabelSelector
	MatchLabelKeys    []string
	MismatchLabelKeys []string
}

type PodAntiAffinity struct {
	RequiredDuringSchedulingIgnoredDuringExecution  []PodAffinityTerm
	PreferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm
}

type PodCertificateProjection struct {
	SignerName           string
	KeyType              string
	MaxExpirationSeconds *int32
	CredentialBundlePath string
	KeyPath              string
	CertificateChainPath string
}

type PodConditionType string

type PodDNSConfig struct {
	Nameservers []string
	Searches    []string
	Options     []PodDNSConfigOption
}

type PodDNSConfigOption struct {
	Name  string
	Value *string
}

type PodFSGroupChangePolicy string

type PodFailurePolicy struct {
	Rules []PodFailurePolicyRule
}

type PodFailurePolicyAction string

type PodFailurePolicyOnExitCodesOperator string

type PodFailurePolicyOnExitCodesRequirement struct {
	ContainerName *string
	Operator      PodFailurePolicyOnExitCodesOperator
	Values        []int32
}

type PodFailurePolicyOnPodConditionsPattern struct {
	Type   PodConditionType
	Status ConditionStatus
}

type PodFailurePolicyRule struct {
	Action          PodFailurePolicyAction
	OnExitCodes     *PodFailurePolicyOnExitCodesRequirement
	OnPodConditions []PodFailurePolicyOnPodConditionsPattern
}

type PodOS struct {
	Name OSName
}

type PodReadinessGate struct {
	ConditionType PodConditionType
}

type PodReplacementPolicy string

type PodResourceClaim struct {
	Name                      string
	ResourceClaimName         *string
	ResourceClaimTemplateName *string
}

type PodSELinuxChangePolicy string

type PodSchedulingGate struct {
	Name string
}

type PodSecurityContext struct {
	SELinuxOptions           *SELinuxOptions
	WindowsOptions           *WindowsSecurityContextOptions
	RunAsUser                *int64
	RunAsGroup               *int64
	RunAsNonRoot             *bool
	SupplementalGroups       []int64
	SupplementalGroupsPolicy *SupplementalGroupsPolicy
	FSGroup                  *int64
	Sysctls                  []Sysctl
	FSGroupChangePolicy      *PodFSGroupChangePolicy
	SeccompProfile           *SeccompProfile
	AppArmorProfile          *AppArmorProfile
	SELinuxChangePolicy      *PodSELinuxChangePolicy
}

type PodSpec struct {
	Volumes                       []Volume
	InitContainers                []Container
	Containers                    []Container
	EphemeralContainers           []EphemeralContainer
	RestartPolicy                 RestartPolicy
	TerminationGracePeriodSeconds *int64
	ActiveDeadlineSeconds         *int64
	DNSPolicy                     DNSPolicy
	NodeSelector                  map[string]string
	ServiceAccountName            string
	DeprecatedServiceAccount      string
	AutomountServiceAccountToken  *bool
	NodeName                      string
	HostNetwork                   bool
	HostPID                       bool
	HostIPC                       bool
	ShareProcessNamespace         *bool
	SecurityContext               *PodSecurityContext
	ImagePullSecrets              []LocalObjectReference
	Hostname                      string
	Subdomain                     string
	Affinity                      *Affinity
	SchedulerName                 string
	Tolerations                   []Toleration
	HostAliases                   []HostAlias
	PriorityClassName             string
	Priority                      *int32
	DNSConfig                     *PodDNSConfig
	ReadinessGates                []PodReadinessGate
	RuntimeClassName              *string
	EnableServiceLinks            *bool
	PreemptionPolicy              *PreemptionPolicy
	Overhead                      ResourceList
	TopologySpreadConstraints     []TopologySpreadConstraint
	SetHostnameAsFQDN             *bool
	OS                            *PodOS
	HostUsers                     *bool
	SchedulingGates               []PodSchedulingGate
	ResourceClaims                []PodResourceClaim
	Resources                     *ResourceRequirements
	HostnameOverride              *string
}

type PodTemplateSpec struct {
	ObjectMeta
	Spec PodSpec
}

type PortworxVolumeSource struct {
	VolumeID string
	FSType   string
	ReadOnly bool
}

type PreemptionPolicy string

type PreferredSchedulingTerm struct {
	Weight     int32
	Preference NodeSelectorTerm
}

type Probe struct {
	ProbeHandler
	InitialDelaySeconds           int32
	TimeoutSeconds                int32
	PeriodSeconds                 int32
	SuccessThreshold              int32
	FailureThreshold              int32
	TerminationGracePeriodSeconds *int64
}

type ProbeHandler struct {
	Exec      *ExecAction
	HTTPGet   *HTTPGetAction
	TCPSocket *TCPSocketAction
	GRPC      *GRPCAction
}

type ProcMountType string

type ProjectedVolumeSource struct {
	Sources     []VolumeProjection
	DefaultMode *int32
}

type Protocol string

type PullPolicy string

type QuobyteVolumeSource struct {
	Registry string
	Volume   string
	ReadOnly bool
	User     string
	Group    string
	Tenant   string
}

type RBDVolumeSource struct {
	CephMonitors []string
	RBDImage     string
	FSType       string
	RBDPool      string
	RadosUser    string
	Keyring      string
	SecretRef    *LocalObjectReference
	ReadOnly     bool
}

type RecursiveReadOnlyMode string

type ResourceClaim struct {
	Name    string
	Request string
}

type ResourceFieldSelector struct {
	ContainerName string
	Resource      string
	Divisor       Quantity
}

type ResourceList map[ResourceName]Quantity

type ResourceName string

type ResourceRequirements struct {
	Limits   ResourceList
	Requests ResourceList
	Claims   []ResourceClaim
}

type ResourceResizeRestartPolicy string

type RestartPolicy string

type SELinuxOptions struct {
	User  string
	Role  string
	Type  string
	Level string
}

type ScaleIOVolumeSource struct {
	Gateway          string
	System           string
	SecretRef        *LocalObjectReference
	SSLEnabled       bool
	ProtectionDomain string
	StoragePool      string
	StorageMode      string
	VolumeName       string
	FSType           string
	ReadOnly         bool
}

type SeccompProfile struct {
	Type             SeccompProfileType
	LocalhostProfile *string
}

type SeccompProfileType string

type SecretEnvSource struct {
	LocalObjectReference
	Optional *bool
}

type SecretKeySelector struct {
	LocalObjectReference
	Key      string
	Optional *bool
}

type SecretProjection struct {
	LocalObjectReference
	Items    []KeyToPath
	Optional *bool
}

type SecretVolumeSource struct {
	SecretName  string
	Items       []KeyToPath
	DefaultMode *int32
	Optional    *bool
}

type SecurityContext struct {
	Capabilities             *Capabilities
	Privileged               *bool
	SELinuxOptions           *SELinuxOptions
	WindowsOptions           *WindowsSecurityContextOptions
	RunAsUser                *int64
	RunAsGroup               *int64
	RunAsNonRoot             *bool
	ReadOnlyRootFilesystem   *bool
	AllowPrivilegeEscalation *bool
	ProcMount                *ProcMountType
	SeccompProfile           *SeccompProfile
	AppArmorProfile          *AppArmorProfile
}

type ServiceAccountTokenProjection struct {
	Audience          string
	ExpirationSeconds *int64
	Path              string
}

type Signal string

type SleepAction struct {
	Seconds int64
}

type StorageMedium string

type StorageOSVolumeSource struct {
	VolumeName      string
	VolumeNamespace string
	FSType          string
	ReadOnly        bool
	SecretRef       *LocalObjectReference
}

type SuccessPolicy struct {
	Rules []SuccessPolicyRule
}

type SuccessPolicyRule struct {
	SucceededIndexes *string
	SucceededCount   *int32
}

type SupplementalGroupsPolicy string

type Sysctl struct {
	Name  string
	Value string
}

type TCPSocketAction struct {
	Port IntOrString
	Host string
}

type TaintEffect string

type TerminationMessagePolicy string

type Toleration struct {
	Key               string
	Operator          TolerationOperator
	Value             string
	Effect            TaintEffect
	TolerationSeconds *int64
}

type TolerationOperator string

type TopologySpreadConstraint struct {
	MaxSkew            int32
	TopologyKey        string
	WhenUnsatisfiable  UnsatisfiableConstraintAction
	LabelSelector      *LabelSelector
	MinDomains         *int32
	NodeAffinityPolicy *NodeInclusionPolicy
	NodeTaintsPolicy   *NodeInclusionPolicy
	MatchLabelKeys     []string
}

type TypedLocalObjectReference struct {
	APIGroup *string
	Kind     string
	Name     string
}

type TypedObjectReference struct {
	APIGroup  *string
	Kind      string
	Name      string
	Namespace *string
}

type UID string

type URIScheme string

type UnsatisfiableConstraintAction string

type Volume struct {
	Name string
	VolumeSource
}

type VolumeDevice struct {
	Name       string
	DevicePath string
}

type VolumeMount struct {
	Name              string
	ReadOnly          bool
	RecursiveReadOnly *RecursiveReadOnlyMode
	MountPath         string
	SubPath           string
	MountPropagation  *MountPropagationMode
	SubPathExpr       string
}

type VolumeProjection struct {
	Secret              *SecretProjection
	DownwardAPI         *DownwardAPIProjection
	ConfigMap           *ConfigMapProjection
	ServiceAccountToken *ServiceAccountTokenProjection
	ClusterTrustBundle  *ClusterTrustBundleProjection
	PodCertificate      *PodCertificateProjection
}

type VolumeResourceRequirements struct {
	Limits   ResourceList
	Requests ResourceList
}

type VolumeSource struct {
	HostPath              *HostPathVolumeSource
	EmptyDir              *EmptyDirVolumeSource
	GCEPersistentDisk     *GCEPersistentDiskVolumeSource
	AWSElasticBlockStore  *AWSElasticBlockStoreVolumeSource
	GitRepo               *GitRepoVolumeSource
	Secret                *SecretVolumeSource
	NFS                   *NFSVolumeSource
	ISCSI                 *ISCSIVolumeSource
	Glusterfs             *GlusterfsVolumeSource
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource
	RBD                   *RBDVolumeSource
	FlexVolume            *FlexVolumeSource
	Cinder                *CinderVolumeSource
	CephFS                *CephFSVolumeSource
	Flocker               *FlockerVolumeSource
	DownwardAPI           *DownwardAPIVolumeSource
	FC                    *FCVolumeSource
	AzureFile             *AzureFileVolumeSource
	ConfigMap             *ConfigMapVolumeSource
	VsphereVolume         *VsphereVirtualDiskVolumeSource
	Quobyte               *QuobyteVolumeSource
	AzureDisk             *AzureDiskVolumeSource
	PhotonPersistentDisk  *PhotonPersistentDiskVolumeSource
	Projected             *ProjectedVolumeSource
	PortworxVolume        *PortworxVolumeSource
	ScaleIO               *ScaleIOVolumeSource
	StorageOS             *StorageOSVolumeSource
	CSI                   *CSIVolumeSource
	Ephemeral             *EphemeralVolumeSource
	Image                 *ImageVolumeSource
}

type VsphereVirtualDiskVolumeSource struct {
	VolumePath        string
	FSType            string
	StoragePolicyName string
	StoragePolicyID   string
}

type WeightedPodAffinityTerm struct {
	Weight          int32
	PodAffinityTerm PodAffinityTerm
}

type WindowsSecurityContextOptions struct {
	GMSACredentialSpecName *string
	GMSACredentialSpec     *string
	RunAsUserName          *string
	HostProcess            *bool
}
