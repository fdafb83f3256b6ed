{{/* Names and labels. */}}
{{- define "lumina.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lumina.fullname" -}}
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

{{- define "lumina.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lumina.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lumina.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "lumina.labels" -}}
helm.sh/chart: {{ include "lumina.chart" . }}
{{ include "lumina.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: lumina
{{- end -}}

{{- define "lumina.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "lumina.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "lumina.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "lumina.workspaceClaim" -}}
{{- default (printf "%s-workspace" (include "lumina.fullname" .)) .Values.workspace.existingClaim -}}
{{- end -}}

{{/* Where the JWKS file is mounted from: "secret", "configMap" or "" (URL). Validates. */}}
{{- define "lumina.jwksSource" -}}
{{- $file := .Values.auth.jwksFile -}}
{{- if and $file.existingSecret $file.existingConfigMap -}}
{{- fail "auth.jwksFile: set existingSecret or existingConfigMap, not both" -}}
{{- end -}}
{{- if .Values.auth.jwksUrl -}}
{{- if or $file.existingSecret $file.existingConfigMap -}}
{{- fail "auth: set jwksUrl or jwksFile, not both" -}}
{{- end -}}
{{- else if $file.existingSecret -}}
secret
{{- else if $file.existingConfigMap -}}
configMap
{{- else -}}
{{- fail "auth: set auth.jwksUrl (your IdP's JWKS URL) or auth.jwksFile.existingSecret / existingConfigMap (a Secret or ConfigMap holding jwks.json)" -}}
{{- end -}}
{{- end -}}

{{/*
The non-secret settings, LUMINA_<KEY>: value. One source for the ConfigMap (the Deployment's
envFrom) and the migration Job's inline env: that hook runs before the release's ConfigMap
exists on first install.
*/}}
{{- define "lumina.settings" -}}
{{- $source := include "lumina.jwksSource" . -}}
LUMINA_CLUSTER_ID: {{ default (include "lumina.fullname" .) .Values.cluster.id | quote }}
LUMINA_JWT_ISSUER: {{ required "auth.issuer is required: the `iss` of the tokens your IdP issues" .Values.auth.issuer | quote }}
LUMINA_JWT_AUDIENCE: {{ required "auth.audience is required: the `aud` tokens must carry" .Values.auth.audience | quote }}
{{- if .Values.auth.jwksUrl }}
LUMINA_JWT_JWKS_URL: {{ .Values.auth.jwksUrl | quote }}
{{- else }}
LUMINA_JWT_JWKS_FILE: {{ printf "%s/%s" (trimSuffix "/" .Values.auth.jwksFile.mountPath) .Values.auth.jwksFile.key | quote }}
{{- end }}
{{- with .Values.auth.proxyHeader }}
LUMINA_JWT_PROXY_HEADER: {{ . | quote }}
{{- end }}
LUMINA_CLUSTER_LEASE_TTL_MS: {{ .Values.cluster.leaseTtlMs | int64 | toString | quote }}
LUMINA_CLUSTER_DRAIN_TIMEOUT_MS: {{ mul .Values.cluster.drainTimeoutSeconds 1000 | int64 | toString | quote }}
LUMINA_MAX_FRAME_BYTES: {{ .Values.cluster.maxFrameBytes | int64 | toString | quote }}
LUMINA_LOG: {{ .Values.logging.level | quote }}
LUMINA_LOG_FORMAT: {{ .Values.logging.format | quote }}
{{- with .Values.model.apiBaseUrl }}
LUMINA_API_BASE_URL: {{ . | quote }}
{{- end }}
{{- with .Values.model.apiModel }}
LUMINA_API_MODEL: {{ . | quote }}
{{- end }}
{{- with .Values.model.apiType }}
LUMINA_API_TYPE: {{ . | quote }}
{{- end }}
{{- range $key, $value := .Values.extraConfig }}
{{- if not (hasPrefix "LUMINA_" $key) }}
{{- fail (printf "extraConfig.%s: keys must be LUMINA_<SETTING> environment names" $key) }}
{{- end }}
{{ $key }}: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{/* Env shared by the instances and the migration Job: paths and secret references. */}}
{{- define "lumina.commonEnv" -}}
# The AppRoot lives on the scratch volume: the root filesystem is read-only.
- name: HOME
  value: /var/lib/lumina
- name: LUMINA_HOME
  value: /var/lib/lumina/app
- name: TMPDIR
  value: /tmp
- name: LUMINA_POSTGRES_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "postgres.existingSecret is required" .Values.postgres.existingSecret }}
      key: {{ .Values.postgres.urlKey }}
- name: LUMINA_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "redis.existingSecret is required" .Values.redis.existingSecret }}
      key: {{ .Values.redis.urlKey }}
{{- with .Values.model.existingSecret }}
- name: LUMINA_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.model.apiKeyKey }}
{{- end }}
{{- end -}}

{{- define "lumina.scratchVolumes" -}}
- name: app-root
  emptyDir:
    sizeLimit: {{ .Values.scratch.appRootSizeLimit }}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.scratch.tmpSizeLimit }}
{{- end -}}

{{- define "lumina.scratchMounts" -}}
- name: app-root
  mountPath: /var/lib/lumina
- name: tmp
  mountPath: /tmp
{{- end -}}
