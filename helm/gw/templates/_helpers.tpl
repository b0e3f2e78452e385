{{/* Name of the chart, overridable. */}}
{{- define "gw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Fully qualified app name: the release name when it already contains the chart name. */}}
{{- define "gw.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gw.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gw
{{- end -}}

{{/* Selector labels of one component: include "gw.selectorLabels" (list . "controller") */}}
{{- define "gw.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "gw.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "gw.componentLabels" -}}
{{- $ := index . 0 -}}
{{ include "gw.labels" $ }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "gw.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "gw.credentialsSecretName" -}}
{{- default (printf "%s-credentials" (include "gw.fullname" .)) .Values.credentials.existingSecret -}}
{{- end -}}

{{- define "gw.redisPasswordSecretName" -}}
{{- default (printf "%s-redis-password" (include "gw.fullname" .)) .Values.redis.password.existingSecret -}}
{{- end -}}

{{/* Whether the components get a Redis password (from a Secret). */}}
{{- define "gw.redisHasPassword" -}}
{{- if or .Values.redis.password.existingSecret .Values.redis.password.value .Values.redis.bundled.enabled -}}true{{- end -}}
{{- end -}}

{{/* Redis URL without password. */}}
{{- define "gw.redisUrl" -}}
{{- if .Values.redis.bundled.enabled -}}
{{- printf "redis://%s-redis.%s.svc:6379" (include "gw.fullname" .) .Release.Namespace -}}
{{- else -}}
{{- .Values.redis.url -}}
{{- end -}}
{{- end -}}

{{/* env entries GW_REDIS_PASSWORD (from the Secret) + GW_REDIS (the URL with $(GW_REDIS_PASSWORD) expanded by the kubelet). */}}
{{- define "gw.redisEnv" -}}
{{- if include "gw.redisHasPassword" . }}
- name: GW_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "gw.redisPasswordSecretName" . }}
      key: {{ .Values.redis.password.key }}
- name: GW_REDIS
  value: {{ regexReplaceAll "^([a-z+]+://)" (include "gw.redisUrl" .) "${1}:$(GW_REDIS_PASSWORD)@" | quote }}
{{- else }}
- name: GW_REDIS
  value: {{ include "gw.redisUrl" . | quote }}
{{- end }}
{{- end -}}

{{/* Downward API env of every gw pod. */}}
{{- define "gw.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{- define "gw.facadeNamespace" -}}
{{- default .Release.Namespace .Values.facade.namespace -}}
{{- end -}}

{{/* Probes on the /healthz and /readyz of a named port. */}}
{{- define "gw.probes" -}}
{{- $port := index . 0 -}}
{{- $scheme := index . 1 -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: {{ $port }}
    scheme: {{ $scheme }}
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ $port }}
    scheme: {{ $scheme }}
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 3
{{- end -}}

{{/* Scheduling knobs of a component's values. */}}
{{- define "gw.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- /*
A checksum of the credentials given as values (management secret and tokens, the Redis password): a
`helm upgrade` that changes one rolls the facade and the controller, whose env reads them only at start.
Kept or generated values do not change across upgrades, so they need no part in it.
*/ -}}
{{- define "gw.credentialsChecksum" -}}
{{- list .Values.credentials.secret .Values.credentials.accessTokens .Values.credentials.existingSecret .Values.redis.password.value .Values.redis.password.existingSecret | toJson | sha256sum -}}
{{- end -}}

{{/*
V8 heap flags of a gw container, in step with its memory limit (docs/helm.md, "Memory"): young
generation capped at `semi` MiB per semi-space, old space at 60 % of the limit (lib/tuning.ts; webhook/node-options.ts
derives the injected sidecar's the same way). Args: (list semiMiB memoryLimit).
*/}}
{{- define "gw.heapNodeOptions" -}}
{{- $semi := index . 0 -}}
{{- $limit := toString (index . 1) -}}
{{- $mib := 0 -}}
{{- if hasSuffix "Gi" $limit -}}{{- $mib = mul (trimSuffix "Gi" $limit | atoi) 1024 -}}
{{- else if hasSuffix "Mi" $limit -}}{{- $mib = trimSuffix "Mi" $limit | atoi -}}
{{- end -}}
--max-semi-space-size={{ $semi }}{{ if $mib }} --max-old-space-size={{ max 32 (div (mul $mib 3) 5) }}{{ end }}
{{- end -}}

{{/*
The names of the shard ConfigMaps of a sharded compiled config (contract/config-shards.ts: heap indices 2 …
2^(SHARD_MAX_DEPTH+1)−1), as a JSON list for resourceNames.
*/}}
{{- define "gw.configShardNames" -}}
{{- $names := list -}}
{{- range $i := untilStep 2 512 1 -}}
{{- $names = append $names (printf "gw-config-%d" $i) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}


{{/* gw-config and its shard names, as a JSON list for resourceNames (what the controller writes). */}}
{{- define "gw.configNames" -}}
{{- $names := list "gw-config" -}}
{{- range $i := untilStep 2 512 1 -}}
{{- $names = append $names (printf "gw-config-%d" $i) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}
