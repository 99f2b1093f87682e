-- Ephemeral: inlined into the pipelines that ref() it, never materialized on its own.
SELECT o.*, e.at AS shipped_at
FROM {{ source('files', 'orders') }} AS o
JOIN {{ source('files', 'events') }} AS e ON e.order_id = o.id AND e.kind = 'shipped'
