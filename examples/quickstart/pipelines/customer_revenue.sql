INSERT INTO {{ sink('warehouse', 'customer_revenue') }}
SELECT customer, country, count(*) AS orders, sum(amount) AS revenue
FROM {{ ref('orders_enriched') }}
GROUP BY customer, country
ORDER BY revenue DESC
