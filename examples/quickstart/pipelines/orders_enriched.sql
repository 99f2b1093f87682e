INSERT INTO {{ sink('lake', 'orders_enriched') }}
SELECT s.id AS order_id, s.amount, s.status, s.ordered_at, s.shipped_at,
       c.name AS customer, c.country
FROM {{ ref('shipped_orders') }} AS s
JOIN {{ source('files', 'customers') }} AS c ON c.id = s.customer_id
WHERE s.amount >= {{ var('min_amount') }}
